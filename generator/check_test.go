package generator_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// TestCheck writes the minimal case, changes the tree on disk and expects
// Check to report exactly the drift each change causes.
func TestCheck(t *testing.T) {
	const queueFile = "jobs/ping/queue.go"
	tests := []struct {
		name string
		// edit changes the written tree in dir.
		edit func(t *testing.T, dir string)
		// want is every problem Check reports, as "path: kind".
		want []string
	}{
		{
			name: "clean",
			edit: func(t *testing.T, dir string) {},
		},
		{
			name: "changed",
			edit: func(t *testing.T, dir string) {
				appendFile(t, filepath.Join(dir, queueFile), "\n// hand edit\n")
			},
			want: []string{queueFile + ": changed"},
		},
		{
			name: "missing",
			edit: func(t *testing.T, dir string) {
				remove(t, filepath.Join(dir, queueFile))
			},
			want: []string{queueFile + ": missing"},
		},
		{
			name: "stale",
			edit: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "jobs/old/queue.go"), generator.GoHeader+"\n\npackage old\n")
			},
			want: []string{"jobs/old/queue.go: stale"},
		},
		{
			name: "not generated",
			edit: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "jobs/ping/handler.go"), "package ping\n\n"+generator.GoHeader+"\n")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newCaseModule(t, "minimal")
			generateAndWrite(t, dir)
			tc.edit(t, dir)
			// As skipjack check does: generate afresh, then compare.
			out := generate(t, dir)
			problems, err := generator.Check(dir, out)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if got := problemStrings(problems); !slices.Equal(got, tc.want) {
				t.Fatalf("check problems:\ngot  %q\nwant %q", got, tc.want)
			}
			for _, p := range problems {
				if p.Diff == "" {
					t.Errorf("%s: no diff", p)
				}
			}
			// Write repairs every problem and leaves files without the
			// header alone.
			if _, err := generator.Write(dir, out); err != nil {
				t.Fatalf("write: %v", err)
			}
			if problems, err := generator.Check(dir, out); err != nil || len(problems) > 0 {
				t.Fatalf("check after write: got (%q, %v), want no problems", problemStrings(problems), err)
			}
			if tc.name == "not generated" {
				if _, err := os.Stat(filepath.Join(dir, "jobs/ping/handler.go")); err != nil {
					t.Errorf("write removed a file without the header: %v", err)
				}
			}
		})
	}
}

// TestCheckMigrationNeeded adds a queue to a written config and expects
// Check to ask for a second migration, which Write then adds without
// touching the first.
func TestCheckMigrationNeeded(t *testing.T) {
	t.Parallel()
	dir := newCaseModule(t, "minimal")
	generateAndWrite(t, dir)
	first := readDir(t, filepath.Join(dir, "migrations"))

	appendFile(t, filepath.Join(dir, "skipjack.yaml"), "  pong:\n    payload:\n      reply: string\n")
	out := generate(t, dir)
	problems, err := generator.Check(dir, out)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	var migrations []string
	for _, p := range problems {
		switch {
		case p.Kind == "migration needed" && strings.HasPrefix(p.Path, "migrations/0002_"):
			migrations = append(migrations, p.Path)
		case p.Kind == "missing" && strings.HasPrefix(p.Path, "jobs/pong/"):
		case p.Kind == "changed" && p.Path == "jobs/migrate.go":
		case p.Kind == "changed" && p.Path == "jobs/skipjack.lock": // records pong's payload
		default:
			t.Errorf("unexpected problem %s", p)
		}
	}
	if len(migrations) != 2 {
		t.Fatalf("migrations needed: got %q, want a 0002 up and down migration", migrations)
	}

	if _, err := generator.Write(dir, out); err != nil {
		t.Fatalf("write: %v", err)
	}
	after := readDir(t, filepath.Join(dir, "migrations"))
	for name, data := range first {
		if !bytes.Equal(after[name], data) {
			t.Errorf("write changed or removed migration %s", name)
		}
	}
	for _, p := range migrations {
		if _, ok := after[filepath.Base(p)]; !ok {
			t.Errorf("write did not add %s", p)
		}
	}
	if len(after) != len(first)+len(migrations) {
		t.Errorf("migrations after write: got %d files, want %d", len(after), len(first)+len(migrations))
	}
	if problems, err := generator.Check(dir, generate(t, dir)); err != nil || len(problems) > 0 {
		t.Fatalf("check after write: got (%q, %v), want no problems", problemStrings(problems), err)
	}
}

// problemStrings formats problems as "path: kind".
func problemStrings(problems []generator.Problem) []string {
	var s []string
	for _, p := range problems {
		s = append(s, p.String())
	}
	return s
}

// readDir returns the contents of every file in dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

// appendFile appends data to the file name.
func appendFile(t *testing.T, name, data string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// remove removes the file name.
func remove(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationStateErrorsArePositioned checks that the errors found
// against the recorded migration state point into skipjack.yaml: a changed
// schema at the schema key, a queue no longer declared at the queues key.
func TestMigrationStateErrorsArePositioned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(yaml string) string
		want string
	}{
		{"schema changed", func(y string) string { return y + "schema: other\n" },
			`skipjack.yaml:9:9: schema changed from "skipjack" to "other"`},
		{"queue no longer declared", func(y string) string { return strings.Replace(y, "  ping:", "  pong:", 1) },
			`skipjack.yaml:5:1: queue ping has a table created by an earlier migration but is no longer declared`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newCaseModule(t, "minimal")
			generateAndWrite(t, dir)
			path := filepath.Join(dir, "skipjack.yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.edit(string(data))), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			_, err = generator.Generate(cfg, generator.Options{SQLC: sqlc, AllowBreaking: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
