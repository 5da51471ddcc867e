package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skipjack-dev/skipjack/internal/api"
)

// apiFiles are the committed API lists, each of the packages users
// program against: the runtime's package skipjack, the dashboard, and
// the code generate writes (examples/shop's, whose queues use most of
// the YAML: the queue package and the migrations package).
var apiFiles = []struct {
	file     string
	packages []string
}{
	{"api/runtime.txt", []string{"github.com/skipjack-dev/skipjack/runtime"}},
	{"api/dashboard.txt", []string{"github.com/skipjack-dev/skipjack/dashboard"}},
	{"api/generated.txt", []string{
		"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs",
		"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/sendemail",
	}},
}

// checkAPI lists the API of each file's packages and compares it with the
// file: a line that is gone is a removed or changed feature, which breaks
// users; a new line is an addition, which the file must record too, so
// that the next change is compared with it. With write, it writes the
// files instead.
func checkAPI(root string, write bool) error {
	var problems []string
	for _, f := range apiFiles {
		features, err := api.Features(root, f.packages...)
		if err != nil {
			return err
		}
		var got []string
		for _, p := range f.packages {
			if len(features[p]) == 0 {
				return fmt.Errorf("%s: package %s has no exported API (or was not found)", f.file, p)
			}
			for _, feat := range features[p] {
				got = append(got, "pkg "+p+", "+feat)
			}
		}
		name := filepath.Join(root, filepath.FromSlash(f.file))
		if write {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(name, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		var removed, added []string
		for _, w := range want {
			if !slices.Contains(got, w) {
				removed = append(removed, "\t-"+w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				added = append(added, "\t+"+g)
			}
		}
		if len(removed) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d features removed or changed, which breaks code written against them; if that is intended (a release that may break, see RELEASING.md), run go run ./internal/release api -w in the same change:\n%s",
				f.file, len(removed), strings.Join(append(removed, added...), "\n")))
		} else if len(added) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d new features; record them with go run ./internal/release api -w:\n%s",
				f.file, len(added), strings.Join(added, "\n")))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	if !write {
		fmt.Println("the exported API matches api/*.txt")
	}
	return nil
}
