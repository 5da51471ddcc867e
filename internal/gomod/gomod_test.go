package gomod

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	deep := filepath.Join(dir, "a", "b")
	nested := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(d, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dir, "module example.com/top\n")
	write(nested, "module example.com/nested\n")

	tests := []struct {
		from, root, data string
	}{
		{from: dir, root: dir, data: "module example.com/top\n"},
		{from: deep, root: dir, data: "module example.com/top\n"},
		{from: nested, root: nested, data: "module example.com/nested\n"},
		{from: filepath.Join(nested, "not", "created"), root: nested, data: "module example.com/nested\n"},
	}
	for _, tt := range tests {
		root, data, err := Find(tt.from)
		if err != nil || root != tt.root || string(data) != tt.data {
			t.Errorf("Find(%s) = %s, %q, %v; want %s, %q, nil", tt.from, root, data, err, tt.root, tt.data)
		}
	}
	if !IsRoot(nested) || IsRoot(deep) {
		t.Errorf("IsRoot(%s) = %v, IsRoot(%s) = %v; want true, false", nested, IsRoot(nested), deep, IsRoot(deep))
	}
}

func TestFindNone(t *testing.T) {
	t.Parallel()
	// The temporary folder may itself be inside a module; / is not.
	if IsRoot("/") {
		t.Skip("/go.mod exists")
	}
	_, _, err := Find("/")
	var nf *NotFoundError
	if !errors.As(err, &nf) || err.Error() != "no go.mod at or above /" {
		t.Errorf("Find(/) error = %v, want a *NotFoundError saying no go.mod at or above /", err)
	}
}
