package generator

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"

	"github.com/skipjack-dev/skipjack/internal/gomod"
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
	root, data, err := gomod.Find(dir)
	var none *gomod.NotFoundError
	if errors.As(err, &none) {
		return module{}, fmt.Errorf("%w: the generated packages need a Go module (run: go mod init <module path>)", err)
	}
	if err != nil {
		return module{}, err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return module{}, fmt.Errorf("%s has no module line", filepath.Join(root, "go.mod"))
	}
	return module{Dir: root, Path: p}, nil
}

// importPath returns the import path of the folder out (absolute) inside m,
// refusing folders outside m or inside a nested module.
func (m module) importPath(out string) (string, error) {
	rel, err := filepath.Rel(m.Dir, out)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("out %s is outside the module %s (%s)", out, m.Path, m.Dir)
	}
	if root, _, err := gomod.Find(out); err == nil && root != m.Dir {
		return "", fmt.Errorf("out %s is inside the nested module at %s; generate from that module instead", out, root)
	}
	if rel == "." {
		return m.Path, nil
	}
	return path.Join(m.Path, filepath.ToSlash(rel)), nil
}
