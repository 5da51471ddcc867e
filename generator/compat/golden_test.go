package compat_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/compat"
	"github.com/skipjack-dev/skipjack/generator/config"
)

var update = flag.Bool("update", false, "rewrite the golden files under ../../golden/breaking")

// TestGoldenBreaking runs every golden/breaking/NAME case: NAME.before.yaml
// is the config the last generate saw (its lock is written as generate
// writes it), NAME.yaml the edited config; Generate must refuse the edit
// with exactly the diagnostics of NAME.stderr.golden, and generate it with
// AllowBreaking up to the point where it would run sqlc, reporting the same
// changes as allowed.
func TestGoldenBreaking(t *testing.T) {
	t.Parallel()
	befores, err := filepath.Glob("../../golden/breaking/*.before.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(befores) == 0 {
		t.Fatal("no cases in golden/breaking")
	}
	for _, before := range befores {
		name := strings.TrimSuffix(filepath.Base(before), ".before.yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := breakingCase(t, before, filepath.Join(filepath.Dir(before), name+".yaml"))
			cfg, err := config.Load(filepath.Join(dir, "skipjack.yaml"))
			if err != nil {
				t.Fatalf("load the edited config: %v", err)
			}
			errSQLC := errors.New("sqlc ran")
			_, err = generator.Generate(cfg, generator.Options{SQLC: func(string) error { return errSQLC }})
			var ce config.Errors
			if !errors.As(err, &ce) {
				t.Fatalf("Generate = %v, want config.Errors", err)
			}
			var got bytes.Buffer
			for _, e := range ce {
				e.File = "skipjack.yaml"
				fmt.Fprintln(&got, e.Error())
			}
			golden := filepath.Join(filepath.Dir(before), name+".stderr.golden")
			compareBreakingGolden(t, golden, got.Bytes())

			// With AllowBreaking the same changes pass: generation goes
			// on to sqlc.
			_, err = generator.Generate(cfg, generator.Options{SQLC: func(string) error { return errSQLC }, AllowBreaking: true})
			if err == nil || !strings.Contains(err.Error(), errSQLC.Error()) {
				t.Errorf("Generate with AllowBreaking = %v, want it to reach sqlc", err)
			}
		})
	}
}

// breakingCase makes a module holding the lock generate writes for before
// and, as skipjack.yaml, the config after, and returns its folder.
func breakingCase(t *testing.T, before, after string) string {
	t.Helper()
	dir := t.TempDir()
	old, err := config.Load(before)
	if err != nil {
		t.Fatalf("load %s: %v", before, err)
	}
	data, err := os.ReadFile(after)
	if err != nil {
		t.Fatal(err)
	}
	lockPath, lock := compat.Lock(old)
	files := map[string][]byte{
		"go.mod":                     []byte("module example.com/golden/breaking\n\ngo 1.26\n"),
		"skipjack.yaml":              data,
		filepath.FromSlash(lockPath): lock,
	}
	for name, data := range files {
		full := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// compareBreakingGolden compares got with the golden file, or rewrites it
// with -update.
func compareBreakingGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./generator/compat -run TestGoldenBreaking -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("diagnostics differ from %s:\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}

// TestCompatLockFile covers the lock file's own states: none yet (nothing
// to compare, generation goes on), unreadable (an error naming the file),
// and a lock in another out folder (the comparison follows out).
func TestCompatLockFile(t *testing.T) {
	t.Parallel()
	const yaml = "version: 1\nout: ./jobs\nqueues:\n  ping:\n    payload: {n: int64}\n"
	errSQLC := errors.New("sqlc ran")
	tests := []struct {
		name string
		lock map[string]string // path -> content
		want string            // the error Generate returns contains it
	}{
		{name: "no lock", want: errSQLC.Error()},
		{
			name: "unreadable lock",
			lock: map[string]string{"jobs/skipjack.lock": compat.LockHeader + "\nqueue ping\n\tfield n int64 maybe\n"},
			want: `jobs/skipjack.lock: line 3: unreadable line "\tfield n int64 maybe" (the file is generated: restore it from version control, or delete it to start over from the YAML)`,
		},
		{
			name: "not a lock",
			lock: map[string]string{"jobs/skipjack.lock": "queue ping\n"},
			want: `jobs/skipjack.lock: line 1: not a skipjack lock file`,
		},
		{
			name: "matching lock",
			lock: map[string]string{"jobs/skipjack.lock": compat.LockHeader + "\nqueue ping\n\tfield n int64\n"},
			want: errSQLC.Error(),
		},
		{
			name: "breaking against the lock",
			lock: map[string]string{"jobs/skipjack.lock": compat.LockHeader + "\nqueue ping\n\tfield n int32\n"},
			want: `skipjack.yaml:5:18: breaking change: field "n" of queue "ping" changed type from int32 to int64`,
		},
		{
			name: "a lock elsewhere is not this config's",
			lock: map[string]string{"migrations/skipjack.lock": compat.LockHeader + "\nqueue ping\n\tfield n int32\n"},
			want: errSQLC.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{"go.mod": "module example.com/x\n\ngo 1.26\n", "skipjack.yaml": yaml}
			for p, data := range tt.lock {
				files[p] = data
			}
			for p, data := range files {
				full := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := config.Load(filepath.Join(dir, "skipjack.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = generator.Generate(cfg, generator.Options{SQLC: func(string) error { return errSQLC }})
			if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), cfg.Path, "skipjack.yaml"), tt.want) {
				t.Errorf("Generate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
