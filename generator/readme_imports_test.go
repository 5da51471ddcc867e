package generator

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeNamesWhatServicesLink checks the README's claim about what a
// service links: every module that generated code imports, in every golden
// case (the runtime, pgx, robfig/cron for cron schedules), is named in the
// README. Imports of the user's own module (example.com/... in the goldens)
// are the user's business.
func TestReadmeNamesWhatServicesLink(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]string{} // module -> a file that imports it
	err = filepath.WalkDir(filepath.Join("..", "golden"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go.golden") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if !strings.Contains(first, ".") || first == "example.com" {
				continue // the standard library, the user's module
			}
			modules[moduleOf(path)] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := modules["github.com/robfig/cron/v3"]; !ok {
		t.Fatalf("no golden imports robfig/cron; modules: %v", modules)
	}
	for m, file := range modules {
		if !strings.Contains(string(readme), m) && !strings.Contains(string(readme), strings.TrimPrefix(m, "github.com/jackc/")) {
			t.Errorf("generated code imports %s (%s), which the README does not name among what a service links", m, file)
		}
	}
}

// moduleOf returns the module of an import path of the modules generated
// code can import.
func moduleOf(path string) string {
	for _, m := range []string{"github.com/skipjack-dev/skipjack/runtime", "github.com/jackc/pgx/v5", "github.com/robfig/cron/v3"} {
		if path == m || strings.HasPrefix(path, m+"/") {
			return m
		}
	}
	return path
}
