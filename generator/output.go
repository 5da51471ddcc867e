package generator

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/skipjack-dev/skipjack/internal/gomod"
)

// Problem is one way the files on disk differ from what the YAML generates.
type Problem struct {
	// Path is the file's path, slash-separated and relative to the config's
	// folder.
	Path string
	// Kind is "changed", "missing", "stale" or "migration needed".
	Kind string
	// Diff is a unified diff from the file on disk to the generated one
	// (for changed, missing and stale files).
	Diff string
}

// String formats p as check prints it.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s", p.Path, p.Kind)
}

// Check compares out with the files under dir (the config's folder) without
// writing anything, and returns every generated file that is changed,
// missing or stale, and every migration the YAML needs that is not there.
func Check(dir string, out *Output) ([]Problem, error) {
	var problems []Problem
	for _, f := range out.Files {
		disk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		switch {
		case os.IsNotExist(err):
			problems = append(problems, Problem{Path: f.Path, Kind: "missing", Diff: unifiedDiff("/dev/null", f.Path, "", string(f.Data))})
		case err != nil:
			return nil, fmt.Errorf("check %s: %w", f.Path, err)
		case !bytes.Equal(disk, f.Data):
			problems = append(problems, Problem{Path: f.Path, Kind: "changed", Diff: unifiedDiff(f.Path+" (on disk)", f.Path+" (generated)", string(disk), string(f.Data))})
		}
	}
	stale, err := staleFiles(dir, out)
	if err != nil {
		return nil, err
	}
	for _, p := range stale {
		disk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", p, err)
		}
		problems = append(problems, Problem{Path: p, Kind: "stale", Diff: unifiedDiff(p, "/dev/null", string(disk), "")})
	}
	for _, f := range out.NewMigrations {
		problems = append(problems, Problem{Path: f.Path, Kind: "migration needed", Diff: unifiedDiff("/dev/null", f.Path, "", string(f.Data))})
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Path < problems[j].Path })
	return problems, nil
}

// Write writes out under dir (the config's folder): every generated file
// that changed and every new migration, each atomically (temporary file and
// rename), and deletes stale generated files under out. Existing migrations
// are never rewritten. It returns the paths it wrote or deleted.
func Write(dir string, out *Output) ([]string, error) {
	var touched []string
	write := func(f File) error {
		full := filepath.Join(dir, filepath.FromSlash(f.Path))
		if disk, err := os.ReadFile(full); err == nil && bytes.Equal(disk, f.Data) {
			return nil
		}
		if err := writeAtomic(full, f.Data); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		touched = append(touched, f.Path)
		return nil
	}
	for _, f := range out.Files {
		if err := write(f); err != nil {
			return touched, err
		}
	}
	for _, f := range out.NewMigrations {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.Path))); err == nil {
			return touched, fmt.Errorf("migration %s already exists; refusing to overwrite it", f.Path)
		}
		if err := write(f); err != nil {
			return touched, err
		}
	}
	stale, err := staleFiles(dir, out)
	if err != nil {
		return touched, err
	}
	for _, p := range stale {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.Remove(full); err != nil {
			return touched, fmt.Errorf("delete stale %s: %w", p, err)
		}
		touched = append(touched, p)
		removeEmptyParents(filepath.Dir(full), filepath.Join(dir, filepath.FromSlash(out.Out)))
	}
	return touched, nil
}

// writeAtomic writes data to name through a temporary file in the same
// folder and a rename, so a reader never sees a partial file.
func writeAtomic(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// removeEmptyParents removes dir and its parents while they are empty,
// stopping at root.
func removeEmptyParents(dir, root string) {
	for dir != root && len(dir) > len(root) {
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// staleFiles returns the generated files under out.Out that out does not
// produce: files whose line 1 is a skipjack header. Nested modules and the
// migrations folder (whose files are never deleted) are not entered.
func staleFiles(dir string, out *Output) ([]string, error) {
	root := filepath.Join(dir, filepath.FromSlash(out.Out))
	migrations := filepath.Join(dir, filepath.FromSlash(out.Migrations))
	produced := map[string]bool{}
	for _, f := range out.Files {
		produced[f.Path] = true
	}
	var stale []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			if p == migrations {
				return filepath.SkipDir
			}
			if p != root && gomod.IsRoot(p) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if produced[rel] || !d.Type().IsRegular() {
			return nil
		}
		generated, err := hasHeader(p)
		if err != nil {
			return err
		}
		if generated {
			stale = append(stale, path.Clean(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s for stale files: %w", out.Out, err)
	}
	sort.Strings(stale)
	return stale, nil
}

// hasHeader reports whether line 1 of the file is a skipjack header.
func hasHeader(name string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, len(GoHeader)+2)
	n, _ := f.Read(buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return string(line) == GoHeader || string(line) == SQLHeader, nil
}
