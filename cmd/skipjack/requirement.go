package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/modfile"

	"github.com/skipjack-dev/skipjack/internal/gomod"
)

// runtimeModule is the module every generated package imports.
const runtimeModule = "github.com/skipjack-dev/skipjack/runtime"

// requireRuntime checks that the go.mod of the module holding dir requires
// the runtime module, which the generated code imports. If not, its error
// says which go get to run, instead of leaving the user with the go
// command's "no required module provides package".
func requireRuntime(dir string) error {
	root, data, err := gomod.Find(dir)
	if err != nil {
		return err
	}
	name := filepath.Join(root, "go.mod")
	f, err := modfile.ParseLax(name, data, nil)
	if err != nil {
		return fmt.Errorf("read go.mod: %w", err)
	}
	if f.Module != nil && f.Module.Mod.Path == runtimeModule {
		return nil // the runtime's own test queues
	}
	for _, r := range f.Require {
		if r.Mod.Path == runtimeModule {
			return nil
		}
	}
	return fmt.Errorf("%s does not require %s, which the generated code imports; run: %s",
		relToWD(name), runtimeModule, goGetRuntime(root))
}

// goGetRuntime is the command that adds the runtime requirement to the
// module in dir, as the user would type it from the current folder.
func goGetRuntime(dir string) string {
	get := "go get " + runtimeModule + "@latest"
	if rel := relToWD(dir); rel != "." {
		return "cd " + rel + " && " + get
	}
	return get
}

// relToWD returns the absolute path p relative to the current folder when
// that is shorter, slash-separated.
func relToWD(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && len(rel) < len(p) {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(p)
}
