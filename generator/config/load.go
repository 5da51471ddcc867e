package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads and validates the config file at path. It returns every
// problem of the file at once as Errors, each positioned as
// "path:line:col: message"; a file that cannot be read is reported with the
// error from the operating system. Load never consults a Go module or
// package: external payload types are only checked for their form.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse validates data as the contents of the config file at path, which
// names the file in errors and locates it (Config.Dir); the file itself is
// not read.
func Parse(path string, data []byte) (*Config, error) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w := &walker{file: path}
	cfg := &Config{Path: path, Dir: dir}
	if root := w.parse(data); root != nil {
		w.config(root, cfg)
	}
	if len(w.errs) > 0 {
		clampToEnd(w.errs, data)
		return nil, sortErrors(w.errs)
	}
	return cfg, nil
}

// clampToEnd moves positions past the end of data to its last character.
// yaml.v3 places the implicit null of a key written on the last line, with
// no line break after it, on the line that would follow; an error about
// that null must still point into the file.
func clampToEnd(errs Errors, data []byte) {
	line, col := 1, 1
	text := string(data)
	for i, r := range text {
		switch r {
		case '\r':
			if strings.HasPrefix(text[i+1:], "\n") {
				continue // \r\n is one line break, counted at the \n
			}
			line, col = line+1, 1
		case '\n', '\u0085', '\u2028', '\u2029':
			line, col = line+1, 1
		default:
			col++
		}
	}
	for i := range errs {
		if errs[i].Line > line || (errs[i].Line == line && errs[i].Col > col) {
			errs[i].Line, errs[i].Col = line, col
		}
	}
}

// parse turns data into the root node of its single YAML document, or
// reports why it cannot and returns nil.
func (w *walker) parse(data []byte) (root *yaml.Node) {
	defer func() {
		// yaml.v3 is not supposed to panic on any input; if it does, the
		// user still gets a diagnostic rather than a stack trace.
		if r := recover(); r != nil {
			w.errorAt(Pos{Line: 1, Col: 1}, "invalid YAML: the parser failed on this file")
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			w.errorAt(Pos{Line: 1, Col: 1}, "empty config")
			return nil
		}
		w.syntaxError(err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		w.errorAt(pos(&extra), "more than one YAML document (the config is a single document)")
		return nil
	case !errors.Is(err, io.EOF):
		w.syntaxError(err)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		w.errorAt(Pos{Line: 1, Col: 1}, "empty config")
		return nil
	}
	return doc.Content[0]
}

// yamlLine matches yaml.v3's syntax errors, which carry a line but no
// column.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError reports a YAML syntax error at column 1 of its line.
func (w *walker) syntaxError(err error) {
	msg := err.Error()
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil && n > 0 {
			line = n
		}
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	w.errorAt(Pos{Line: line, Col: 1}, "invalid YAML: %s", msg)
}
