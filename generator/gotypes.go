package generator

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/templates"
)

// imports names the imports of one generated file, renaming a package whose
// name would collide with another import or a top-level identifier.
type imports struct {
	taken  map[string]bool   // local names in use (identifiers and imports)
	byPath map[string]string // import path -> local name
	named  map[string]bool   // paths imported under an explicit name
}

func newImports(identifiers ...string) *imports {
	im := &imports{taken: map[string]bool{}, byPath: map[string]string{}, named: map[string]bool{}}
	for _, id := range identifiers {
		im.taken[id] = true
	}
	return im
}

// use imports path, whose package is called name, and returns the name the
// file refers to it by.
func (im *imports) use(path, name string) string {
	if local, ok := im.byPath[path]; ok {
		return local
	}
	local := name
	for n := 1; im.taken[local]; n++ {
		local = name + strconv.Itoa(n)
	}
	im.taken[local] = true
	im.byPath[path] = local
	if local != name {
		im.named[path] = true
	}
	return local
}

// useNamed imports path under an explicit local name that the caller
// reserved.
func (im *imports) useNamed(path, local string) {
	im.byPath[path] = local
	im.named[path] = true
}

// split returns the imports grouped as gofmt and goimports would: standard
// library first, then the rest, each sorted by path.
func (im *imports) split() (std, other []templates.Import) {
	paths := make([]string, 0, len(im.byPath))
	for p := range im.byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		imp := templates.Import{Path: p}
		if im.named[p] {
			imp.Name = im.byPath[p]
		}
		if isStd(p) {
			std = append(std, imp)
		} else {
			other = append(other, imp)
		}
	}
	return std, other
}

// isStd reports whether path is in the standard library: its first element
// has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// typeWriter renders field types of one file.
type typeWriter struct {
	im       *imports
	external map[string]external
	// sharedUsed collects the shared struct names the file uses, when not
	// nil (queue packages re-export them by alias; the shared package
	// declares them).
	sharedUsed map[string]bool
	// shared are the structs of types:, by name, whose field defaults
	// also fill a struct-typed field a JSON object lacks.
	shared map[string]config.Struct
}

// goType returns t as a Go type expression, importing what it needs.
func (w *typeWriter) goType(t *config.TypeExpr) string {
	switch t.Kind {
	case config.KindSlice:
		return "[]" + w.goType(t.Elem)
	case config.KindMap:
		return "map[string]" + w.goType(t.Elem)
	case config.KindPointer:
		return "*" + w.goType(t.Elem)
	case config.KindShared:
		if w.sharedUsed != nil {
			w.sharedUsed[t.Name] = true
		}
		return t.Name
	case config.KindExternal:
		return w.im.use(t.ImportPath, w.external[t.ImportPath].Name) + "." + t.Name
	default:
		switch {
		case strings.HasPrefix(t.Name, "time."):
			return w.im.use("time", "time") + strings.TrimPrefix(t.Name, "time")
		case strings.HasPrefix(t.Name, "json."):
			return w.im.use("encoding/json", "json") + strings.TrimPrefix(t.Name, "json")
		}
		return t.Name
	}
}

// structOf renders a struct with its doc comment: its fields, and the name
// of encoding/json when a field has a default, which the struct's
// UnmarshalJSON fills in.
func (w *typeWriter) structOf(name, doc string, fs []config.Field) templates.Struct {
	s := templates.Struct{Name: name, Doc: doc, Fields: make([]templates.Field, len(fs))}
	for i, f := range fs {
		s.Fields[i] = templates.Field{Name: f.GoName, Type: w.goType(f.Type), Key: f.Key, Deprecated: f.Deprecated, Default: w.fieldDefault(f)}
		if s.Fields[i].Default != "" {
			s.JSON = w.im.use("encoding/json", "json")
		}
	}
	return s
}

// fieldDefault returns the Go expression a JSON object without f decodes
// f with, or "" for the zero value: f's own default, or for a field of a
// shared struct, that struct with the defaults of its fields
// (Address{Country: "DE"}), as an object without them decodes.
func (w *typeWriter) fieldDefault(f config.Field) string {
	switch {
	case f.Type == nil:
		return ""
	case f.Default != "":
		return w.defaultExpr(f.Type, f.Default)
	case f.Type.Kind != config.KindShared:
		return ""
	}
	var parts []string
	for _, sf := range w.shared[f.Type.Name].Fields {
		if d := w.fieldDefault(sf); d != "" {
			parts = append(parts, sf.GoName+": "+d)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return w.goType(f.Type) + "{" + strings.Join(parts, ", ") + "}"
}

// defaultExpr returns a field default, which config has checked and
// encoded as encoding/json encodes a value of t, as a Go expression.
func (w *typeWriter) defaultExpr(t *config.TypeExpr, encoded string) string {
	switch t.Name {
	case "string":
		var s string
		_ = json.Unmarshal([]byte(encoded), &s) // a JSON string, from config
		return strconv.Quote(s)
	case "time.Duration":
		ns, _ := strconv.ParseInt(encoded, 10, 64) // integer nanoseconds, from config
		return strings.ReplaceAll(durationExpr(time.Duration(ns)), "time.", w.im.use("time", "time")+".")
	}
	// true, false and numbers read the same in Go as in JSON.
	return encoded
}
