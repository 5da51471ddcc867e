package generator

import (
	"fmt"

	"github.com/aymanbagabas/go-udiff"
)

// unifiedDiff returns a unified diff (3 lines of context) from old to new,
// labelled with the two names, or "" when they are equal. The line diff is
// go-udiff's (a port of the Go team's internal/diff), whose Myers search is
// bounded, so time and memory stay near linear even for two large inputs
// that share little.
func unifiedDiff(oldName, newName, old, new string) string {
	if old == new {
		return ""
	}
	d, err := udiff.ToUnified(oldName, newName, old, udiff.Lines(old, new), udiff.DefaultContextLines)
	if err != nil {
		// Lines computed the edits from old itself, so they always apply;
		// still, a report without a diff beats a panic.
		return fmt.Sprintf("--- %s\n+++ %s\n(no diff: %v)\n", oldName, newName, err)
	}
	return d
}
