package generator

import (
	"bytes"
	"fmt"
	"go/format"
	"strings"
)

// format gofmts every Go file; a template bug shows the offending source
// with line numbers.
func (g *gen) format() error {
	for i, f := range g.files {
		if !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		src, err := format.Source(f.Data)
		if err != nil {
			return fmt.Errorf("format generated %s: %v\n%s", f.Path, err, numbered(f.Data))
		}
		g.files[i].Data = src
	}
	return nil
}

// numbered returns src with line numbers, for error messages.
func numbered(src []byte) string {
	var b strings.Builder
	for i, line := range bytes.Split(src, []byte("\n")) {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
