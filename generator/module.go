package generator

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// module is the Go module that holds a config's generated packages.
type module struct {
	// Dir is the absolute folder of the module's go.mod.
	Dir string
	// Path is the module path.
	Path string
}

// findModule returns the module of the nearest go.mod at or above dir.
func findModule(dir string) (module, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			p := modfile.ModulePath(data)
			if p == "" {
				return module{}, fmt.Errorf("%s has no module line", filepath.Join(d, "go.mod"))
			}
			return module{Dir: d, Path: p}, nil
		}
		if !os.IsNotExist(err) {
			return module{}, fmt.Errorf("read go.mod: %w", err)
		}
		if parent := filepath.Dir(d); parent == d {
			return module{}, fmt.Errorf("no go.mod at or above %s: the generated packages need a Go module (run: go mod init <module path>)", dir)
		}
	}
}

// importPath returns the import path of the folder out (absolute) inside m,
// refusing folders outside m or inside a nested module.
func (m module) importPath(out string) (string, error) {
	rel, err := filepath.Rel(m.Dir, out)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("out %s is outside the module %s (%s)", out, m.Path, m.Dir)
	}
	for d := out; d != m.Dir && len(d) > len(m.Dir); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return "", fmt.Errorf("out %s is inside the nested module at %s; generate from that module instead", out, d)
		}
	}
	if rel == "." {
		return m.Path, nil
	}
	return path.Join(m.Path, filepath.ToSlash(rel)), nil
}
