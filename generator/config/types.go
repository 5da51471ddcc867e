package config

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// builtins are the type expressions that need no declaration.
var builtins = []string{
	"bool", "string",
	"int", "int8", "int16", "int32", "int64",
	"uint", "uint8", "uint16", "uint32", "uint64",
	"float32", "float64",
	"[]byte", "time.Time", "time.Duration", "json.RawMessage",
}

// unsupported are Go types a payload field cannot have, with the reason.
var unsupported = map[string]string{
	"any":         "payload fields need a concrete type",
	"interface{}": "payload fields need a concrete type",
	"error":       "errors do not survive a JSON round trip",
	"uintptr":     "it is not a value type",
	"complex64":   "JSON has no complex numbers",
	"complex128":  "JSON has no complex numbers",
	"byte":        `use "uint8", or "[]byte" for bytes`,
	"rune":        `use "int32", or "string" for text`,
}

// unsupportedKinds match the kinds of Go types whose spelling needs a
// space or a literal body (chan int, func(), struct{...}), which a payload
// field cannot have, anywhere in a type expression, with the reason.
var unsupportedKinds = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`(^|[\]*])(<-\s*)?chan\b`), "channels do not survive a JSON round trip"},
	{regexp.MustCompile(`(^|[\]*])func\s*\(`), "functions do not survive a JSON round trip"},
	{regexp.MustCompile(`(^|[\]*])struct\s*\{`), "declare the struct under types: and use its name"},
}

// unsupportedKind says why the type expression spaced (fields separated by
// one space) is of a kind a payload cannot hold, or returns "". It runs
// before the spaces are dropped, so "chan int" is reported as itself, not
// as an unknown "chanint".
func unsupportedKind(spaced string) string {
	for _, k := range unsupportedKinds {
		if k.re.MatchString(spaced) {
			return fmt.Sprintf("unsupported type %q: %s", spaced, k.why)
		}
	}
	return ""
}

// String spells t as in the YAML: "*time.Time", "map[string][]Address",
// "github.com/google/uuid.UUID".
func (t *TypeExpr) String() string {
	if t == nil {
		return ""
	}
	switch t.Kind {
	case KindSlice:
		return "[]" + t.Elem.String()
	case KindMap:
		return "map[string]" + t.Elem.String()
	case KindPointer:
		return "*" + t.Elem.String()
	case KindExternal:
		return t.ImportPath + "." + t.Name
	}
	return t.Name
}

// Nilable reports whether JSON null is a value of t: it decodes to nil, so
// a job without the field is told apart from one that sets it.
func (t *TypeExpr) Nilable() bool {
	switch t.Kind {
	case KindPointer, KindSlice, KindMap:
		return true
	}
	return t.Kind == KindBuiltin && (t.Name == "[]byte" || t.Name == "json.RawMessage")
}

// typeScope resolves the names a type expression may use.
type typeScope struct {
	// shared holds the names declared in types:.
	shared map[string]bool
	// candidates are every known name, for "did you mean".
	candidates []string
}

// newTypeScope returns a scope of the builtins and the given shared names.
func newTypeScope(shared []string) *typeScope {
	s := &typeScope{shared: make(map[string]bool, len(shared))}
	s.candidates = append(s.candidates, builtins...)
	for _, name := range shared {
		s.shared[name] = true
		s.candidates = append(s.candidates, name)
	}
	return s
}

var (
	// exportedIdent is an exported Go identifier (the name of an external type).
	exportedIdent = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	// stdPackage is an import path of one element, as of package net.
	stdPackage = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	// pathElem is one element of an import path.
	pathElem = regexp.MustCompile(`^[A-Za-z0-9_.~+-]+$`)
)

// parse parses a type expression, or says what is wrong with it.
func (s *typeScope) parse(expr string) (*TypeExpr, string) {
	switch {
	case expr == "":
		return nil, "missing type"
	case slices.Contains(builtins, expr):
		return &TypeExpr{Kind: KindBuiltin, Name: expr}, ""
	case strings.HasPrefix(expr, "*"):
		elem, msg := s.parse(expr[1:])
		if msg != "" {
			return nil, msg
		}
		if elem.Kind == KindPointer {
			return nil, fmt.Sprintf("pointer to pointer in %q: one * makes a field optional", expr)
		}
		return &TypeExpr{Kind: KindPointer, Elem: elem}, ""
	case strings.HasPrefix(expr, "[]"):
		elem, msg := s.parse(expr[2:])
		if msg != "" {
			return nil, msg
		}
		return &TypeExpr{Kind: KindSlice, Elem: elem}, ""
	case strings.HasPrefix(expr, "map["):
		end := strings.IndexByte(expr, ']')
		if end < 0 {
			return nil, fmt.Sprintf("missing ] in %q", expr)
		}
		if key := expr[len("map["):end]; key != "string" {
			return nil, fmt.Sprintf("map keys must be string, not %q", key)
		}
		elem, msg := s.parse(expr[end+1:])
		if msg != "" {
			return nil, msg
		}
		return &TypeExpr{Kind: KindMap, Elem: elem}, ""
	case strings.HasPrefix(expr, "["):
		return nil, fmt.Sprintf("arrays are not supported (%q); use a slice", expr)
	case s.shared[expr]:
		return &TypeExpr{Kind: KindShared, Name: expr}, ""
	}
	if why, ok := unsupported[expr]; ok {
		return nil, fmt.Sprintf("unsupported type %q: %s", expr, why)
	}
	hint := didYouMean(expr, s.candidates)
	if dot := strings.LastIndexByte(expr, '.'); dot > 0 {
		path, name := expr[:dot], expr[dot+1:]
		switch {
		case strings.ContainsAny(path, "/."):
			return external(expr, path, name)
		case hint != "":
			// time.Tme: a typo of a builtin, not a type of package time.
		case path == "json":
			hint = fmt.Sprintf(" (did you mean %q?)", "encoding/json."+name)
		case stdPackage.MatchString(path):
			// A standard package without a slash, such as net.IP.
			return external(expr, path, name)
		}
	}
	return nil, fmt.Sprintf("unknown type %q%s", expr, hint)
}

// external checks the form of an external type import/path.Name; whether
// it exists is for the generator to find out.
func external(expr, path, name string) (*TypeExpr, string) {
	for elem := range strings.SplitSeq(path, "/") {
		if !pathElem.MatchString(elem) || elem == "." || elem == ".." {
			return nil, fmt.Sprintf("invalid import path %q in type %q", path, expr)
		}
	}
	if !exportedIdent.MatchString(name) {
		return nil, fmt.Sprintf("invalid type %q: %q is not an exported Go type name", expr, name)
	}
	return &TypeExpr{Kind: KindExternal, Name: name, ImportPath: path}, ""
}

// fields walks a payload or struct mapping (field key → type expression).
func (w *walker) fields(n *yaml.Node, what string, scope *typeScope) []Field {
	ps, _ := w.pairs(n, what, "field")
	var out []Field
	goNames := make(map[string]entry)
	for _, p := range ps {
		if !fieldKey.MatchString(p.key) {
			w.errorf(p.keyNode, "invalid field name %q: use snake_case (lowercase letters, digits and underscores, starting with a letter)", p.key)
			continue
		}
		f := Field{Key: p.key, GoName: GoName(p.key), Pos: pos(p.value)}
		if prev, dup := goNames[f.GoName]; dup {
			w.errorf(p.keyNode, "field %q and field %q (line %d) both become Go field %s", p.key, prev.key, prev.keyNode.Line, f.GoName)
			continue
		}
		goNames[f.GoName] = p
		typeNode := p.value
		var defaultNode *yaml.Node
		if p.value.Kind == yaml.MappingNode {
			// The long form: key: {type: string, deprecated: true, default: x}.
			s, _ := w.section(p.value, fmt.Sprintf("field %q", p.key), fieldKeys)
			w.flag(s, "deprecated", &f.Deprecated)
			if d, ok := s["default"]; ok {
				defaultNode = d.value
			}
			t, ok := s["type"]
			if !ok {
				w.errorf(p.value, "field %q: missing required key \"type\"", p.key)
				out = append(out, f) // known, so later checks do not call it unknown
				continue
			}
			typeNode = t.value
			f.Pos = pos(typeNode)
		}
		// Fields whose type is wrong are kept without a Type, so that
		// checks that refer to fields by key do not report them again;
		// the config is never returned when an error was reported.
		if typeNode.Kind != yaml.ScalarNode || isNull(typeNode) || typeNode.ShortTag() != "!!str" {
			w.errorf(typeNode, "type of field %q must be a string such as \"[]string\", not %s (quote types that start with [ or *)", p.key, describe(typeNode))
			out = append(out, f)
			continue
		}
		spaced := strings.Join(strings.Fields(typeNode.Value), " ")
		if msg := unsupportedKind(spaced); msg != "" {
			w.errorf(typeNode, "%s", msg)
			out = append(out, f)
			continue
		}
		expr := strings.ReplaceAll(spaced, " ", "")
		t, msg := scope.parse(expr)
		if msg != "" {
			w.errorf(typeNode, "%s", msg)
			out = append(out, f)
			continue
		}
		f.Type = t
		if defaultNode != nil {
			f.Default = w.fieldDefault(p.key, t, defaultNode)
		}
		out = append(out, f)
	}
	return out
}

// fieldKeys are the keys of a field's long form.
var fieldKeys = []string{"type", "deprecated", "default"}

// fieldDefault checks n, the default of field key of type t, and returns it
// as encoding/json encodes the Go value, or "" after reporting why it
// cannot be.
func (w *walker) fieldDefault(key string, t *TypeExpr, n *yaml.Node) string {
	if why := noDefault(t); why != "" {
		w.errorf(n, "field %q (%s) cannot have a default: %s", key, t, why)
		return ""
	}
	enc := &payloadEncoder{w: w, subject: func(string) string { return fmt.Sprintf("default of field %q", key) }}
	var b strings.Builder
	if !enc.value(n, t, key, &b) {
		return ""
	}
	return b.String()
}

// Defaultable reports whether a field of type t may have a default: bool,
// string, numbers and time.Duration may.
func (t *TypeExpr) Defaultable() bool { return noDefault(t) == "" }

// noDefault says why a field of type t cannot have a default, or returns
// "" when it can: defaults are single values (bool, string, numbers,
// time.Duration) that a job without the field decodes with.
func noDefault(t *TypeExpr) string {
	switch t.Kind {
	case KindPointer:
		return "a job without it decodes as nil, which tells it apart from a job that sets it; drop the * to give it a default"
	case KindSlice, KindMap:
		return "a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)"
	case KindShared:
		return fmt.Sprintf("give the fields of %s defaults instead", t.Name)
	case KindExternal:
		return fmt.Sprintf("skipjack cannot check the JSON form of %s", t)
	}
	switch t.Name {
	case "[]byte", "json.RawMessage":
		return "a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)"
	case "time.Time":
		return `a fixed instant makes a poor default; make it "*time.Time" and decide in the handler`
	}
	return ""
}

// ParseType parses a field type expression as skipjack.yaml spells it
// ("*time.Time", "map[string][]Address", "github.com/google/uuid.UUID"),
// where shared are the names declared in types:.
func ParseType(expr string, shared []string) (*TypeExpr, error) {
	t, msg := newTypeScope(shared).parse(expr)
	if msg != "" {
		return nil, errors.New(msg)
	}
	return t, nil
}

// structNames walks types:. It reports invalid names and returns the valid
// ones, in file order, with their field mappings still to walk.
func (w *walker) structNames(n *yaml.Node) []entry {
	ps, _ := w.pairs(n, "types", "type")
	var out []entry
	for _, p := range ps {
		switch {
		case !structName.MatchString(p.key):
			w.errorf(p.keyNode, "invalid type name %q: use an exported Go name (a capital letter, then letters and digits)", p.key)
		case reservedTypes[p.key]:
			w.errorf(p.keyNode, "type name %q is reserved: generated packages declare their own %s", p.key, p.key)
		default:
			out = append(out, p)
		}
	}
	return out
}

// checkCycles reports shared structs that contain themselves by value,
// directly or through other shared structs, which Go cannot lay out.
func (w *walker) checkCycles(structs []Struct) {
	byName := make(map[string]*Struct, len(structs))
	for i := range structs {
		byName[structs[i].Name] = &structs[i]
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[string]int)
	var stack []string
	var visit func(s *Struct)
	visit = func(s *Struct) {
		state[s.Name] = visiting
		stack = append(stack, s.Name)
		for _, f := range s.Fields {
			if f.Type == nil || f.Type.Kind != KindShared {
				continue
			}
			next := byName[f.Type.Name]
			switch {
			case next == nil:
			case state[next.Name] == visiting:
				i := slices.Index(stack, next.Name)
				path := append(slices.Clone(stack[i:]), next.Name)
				w.errorAt(f.Pos, "type %q contains itself by value (%s); make one of these fields a pointer", next.Name, strings.Join(path, " -> "))
			case state[next.Name] == unvisited:
				visit(next)
			}
		}
		stack = stack[:len(stack)-1]
		state[s.Name] = done
	}
	for i := range structs {
		if state[structs[i].Name] == unvisited {
			visit(&structs[i])
		}
	}
}
