package lockstep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRepo writes files (slash paths relative to a new folder) and
// returns the folder.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// repo is a checkout laid out like skipjack's, at v0.1.0.
func repo() map[string]string {
	return map[string]string{
		"go.work": "go 1.26\n\nuse (\n\t.\n\t./bench\n\t./dashboard\n\t./otel\n\t./runtime\n)\n\n" +
			"replace (\n\texample.com/sj v0.1.0 => ./\n\texample.com/sj/dashboard v0.1.0 => ./dashboard\n" +
			"\texample.com/sj/otel v0.1.0 => ./otel\n\texample.com/sj/runtime v0.1.0 => ./runtime\n)\n",
		"go.mod":           "module example.com/sj\n\ngo 1.26\n\nrequire (\n\texample.com/sj/dashboard v0.1.0\n\texample.com/sj/runtime v0.1.0\n)\n",
		"runtime/go.mod":   "module example.com/sj/runtime\n\ngo 1.26\n",
		"dashboard/go.mod": "module example.com/sj/dashboard\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.1.0\n",
		"otel/go.mod":      "module example.com/sj/otel\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.1.0\n",
		"bench/go.mod":     "module example.com/sj/bench\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.1.0\n",
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change map[string]string // files replaced in repo()
		want   []string          // substrings of the error; none: Check passes
	}{
		{name: "lockstep"},
		{
			name:   "two versions",
			change: map[string]string{"otel/go.mod": "module example.com/sj/otel\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.0.9\n"},
			want:   []string{"2 versions (v0.0.9, v0.1.0)", "otel/go.mod:5: requires example.com/sj/runtime v0.0.9"},
		},
		{
			name:   "replace in a published module",
			change: map[string]string{"dashboard/go.mod": "module example.com/sj/dashboard\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.1.0\n\nreplace example.com/other => ../other\n"},
			want:   []string{"dashboard/go.mod:7: replace example.com/other in a published module"},
		},
		{
			name:   "replace of a published module elsewhere",
			change: map[string]string{"bench/go.mod": "module example.com/sj/bench\n\ngo 1.26\n\nrequire example.com/sj/runtime v0.1.0\n\nreplace example.com/sj/runtime => ../runtime\n"},
			want:   []string{"bench/go.mod:7: replace example.com/sj/runtime (go.work joins"},
		},
		{
			name:   "go.work at another version",
			change: map[string]string{"go.work": "go 1.26\n\nuse (\n\t.\n\t./bench\n\t./dashboard\n\t./otel\n\t./runtime\n)\n\nreplace example.com/sj/runtime v0.0.9 => ./runtime\n"},
			want:   []string{"go.work:11: replace example.com/sj/runtime v0.0.9 => ./runtime; want example.com/sj/runtime v0.1.0 => ./runtime", "go.work: no replace example.com/sj/dashboard v0.1.0 => ./dashboard"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := repo()
			for name, data := range tt.change {
				files[name] = data
			}
			root := writeRepo(t, files)
			mods, err := Load(root)
			if err != nil {
				t.Fatal(err)
			}
			version, err := Check(root, mods)
			if len(tt.want) == 0 {
				if err != nil || version != "v0.1.0" {
					t.Fatalf("Check = %q, %v; want v0.1.0", version, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = %q, nil; want an error saying %q", version, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check's error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestSetVersionAll moves a checkout to the next version: every
// requirement between its modules and go.work's replace lines follow, and
// Check agrees.
func TestSetVersionAll(t *testing.T) {
	t.Parallel()
	root := writeRepo(t, repo())
	mods, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetVersionAll(root, mods, "v0.2.0"); err != nil {
		t.Fatal(err)
	}
	if version, err := Check(root, mods); err != nil || version != "v0.2.0" {
		t.Fatalf("after SetVersionAll(v0.2.0): Check = %q, %v", version, err)
	}
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "replace (\n\texample.com/sj v0.2.0 => ./\n"; !strings.Contains(string(work), want) {
		t.Errorf("go.work keeps no replace block starting %q:\n%s", want, work)
	}
	if err := SetVersionAll(root, mods, "0.3"); err == nil {
		t.Error("SetVersionAll(0.3) = nil; want an error (not vX.Y.Z)")
	}
}

// TestPublishedNotInWork: a published module that go.work leaves out
// would be released untested.
func TestPublishedNotInWork(t *testing.T) {
	t.Parallel()
	files := repo()
	files["go.work"] = "go 1.26\n\nuse (\n\t.\n\t./runtime\n)\n"
	if _, err := Load(writeRepo(t, files)); err == nil || !strings.Contains(err.Error(), "dashboard is not in go.work") {
		t.Errorf("Load = %v; want an error naming dashboard", err)
	}
}
