package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a config file, positioned like a Go compiler
// diagnostic.
type Error struct {
	// File is the config's path as given to Load.
	File string
	// Line and Col are 1-based; Col is 1 when only the line is known, and
	// both are 0 when the problem concerns the file as a whole.
	Line, Col int
	// Msg describes the problem.
	Msg string
}

// Error formats e as "FILE:LINE:COL: MSG".
func (e Error) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
}

// Errors is every problem found in one config file, sorted by position.
type Errors []Error

// Error returns one error per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sortErrors orders errs by position, keeping the order in which errors at
// the same position were found, and drops repeats (a node reached twice
// through YAML aliases).
func sortErrors(errs Errors) Errors {
	slices.SortStableFunc(errs, func(a, b Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return slices.Compact(errs)
}

// DidYouMean returns ` (did you mean "x"?)` for the candidate closest to
// got, or "" when none is close enough to be a likely typo: the hint of
// every config error, for the CLI's own names too.
func DidYouMean(got string, candidates []string) string { return didYouMean(got, candidates) }

func didYouMean(got string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := editDistance(strings.ToLower(got), strings.ToLower(c))
		if d == 0 && got != c {
			// A difference of case only is the likeliest typo of all.
			return fmt.Sprintf(" (did you mean %q?)", c)
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 2
	if len(got) <= 3 {
		limit = 1
	}
	if bestDist < 1 || bestDist > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the optimal string alignment distance between a and b:
// the Levenshtein distance where swapping two adjacent bytes costs 1.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
