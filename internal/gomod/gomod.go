// Package gomod finds the go.mod of the Go module that holds a folder.
package gomod

import (
	"fmt"
	"os"
	"path/filepath"
)

// NotFoundError is Find's error when no folder at or above Dir holds a
// go.mod.
type NotFoundError struct {
	// Dir is the folder the search started from.
	Dir string
}

// Error says where the search started.
func (e *NotFoundError) Error() string {
	return "no go.mod at or above " + e.Dir
}

// Find walks up from dir to the nearest folder that holds a go.mod and
// returns that folder and the file's content. When there is none, the
// error is a *NotFoundError.
func Find(dir string) (root string, data []byte, err error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			return d, data, nil
		}
		if !os.IsNotExist(err) {
			return "", nil, fmt.Errorf("read go.mod: %w", err)
		}
		if filepath.Dir(d) == d {
			return "", nil, &NotFoundError{Dir: dir}
		}
	}
}

// IsRoot reports whether dir holds a go.mod, which makes it the root of a
// module of its own.
func IsRoot(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
