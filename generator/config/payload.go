package config

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// maxPayloadNodes bounds the YAML nodes one schedule payload may visit, so
// that aliases that multiply a value cannot make the walk explode.
const maxPayloadNodes = 10000

// payloadEncoder checks a YAML value against payload field types and
// encodes it as encoding/json would encode the Go value.
type payloadEncoder struct {
	w       *walker
	structs map[string]*Struct
	nodes   int
	// exhausted is set once the node budget is spent, so that it is
	// reported once.
	exhausted bool
	// subject names the value at path in errors; nil names it as a part
	// of a schedule payload.
	subject func(path string) string
}

// about names the value at path in errors: "schedule payload: to".
func (p *payloadEncoder) about(path string) string {
	if p.subject != nil {
		return p.subject(path)
	}
	return "schedule payload: " + path
}

// object encodes mapping n as a struct with the given fields: the keys
// written, in field order. what names n in errors about its form; path is
// its dotted path in the payload ("" at the top).
func (p *payloadEncoder) object(n *yaml.Node, fields []Field, what, path string, b *strings.Builder) bool {
	n = deref(n)
	if !p.visit(n) {
		return false
	}
	ps, ok := p.w.pairs(n, what, "field")
	if !ok {
		return false
	}
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.Key
	}
	values := make(map[string]*yaml.Node, len(ps))
	for _, e := range ps {
		if !slices.Contains(keys, e.key) {
			p.w.errorf(e.keyNode, "unknown field %q in %s%s", join(path, e.key), what, didYouMean(e.key, keys))
			ok = false
			continue
		}
		values[e.key] = e.value
	}
	b.WriteByte('{')
	first := true
	for _, f := range fields {
		v, set := values[f.Key]
		if !set || f.Type == nil {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(jsonString(f.Key))
		b.WriteByte(':')
		if !p.value(v, f.Type, join(path, f.Key), b) {
			ok = false
		}
	}
	b.WriteByte('}')
	return ok
}

// join appends key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// visit counts n against the node budget and reports whether the walk may
// go on.
func (p *payloadEncoder) visit(n *yaml.Node) bool {
	p.nodes++
	if p.nodes <= maxPayloadNodes {
		return true
	}
	if !p.exhausted {
		p.exhausted = true
		p.w.errorf(n, "schedule payload is too large (more than %d values)", maxPayloadNodes)
	}
	return false
}

// value encodes n as a value of type t at path.
func (p *payloadEncoder) value(n *yaml.Node, t *TypeExpr, path string, b *strings.Builder) bool {
	n = deref(n)
	if !p.visit(n) {
		return false
	}
	if isNull(n) {
		if t.Nilable() {
			b.WriteString("null")
			return true
		}
		p.w.errorf(n, "%s (%s) cannot be null; leave it out for its zero value", p.about(path), t)
		return false
	}
	switch t.Kind {
	case KindPointer:
		return p.value(n, t.Elem, path, b)
	case KindSlice:
		if n.Kind != yaml.SequenceNode {
			return p.mismatch(n, path, t, "a list")
		}
		ok := true
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !p.value(c, t.Elem, path+"["+strconv.Itoa(i)+"]", b) {
				ok = false
			}
		}
		b.WriteByte(']')
		return ok
	case KindMap:
		if n.Kind != yaml.MappingNode {
			return p.mismatch(n, path, t, "a mapping")
		}
		ps, ok := p.w.pairs(n, "schedule payload: "+path, "key")
		// encoding/json writes map keys sorted.
		slices.SortFunc(ps, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		b.WriteByte('{')
		for i, e := range ps {
			if i > 0 {
				b.WriteByte(',')
			}
			if strings.ContainsRune(e.key, 0) {
				p.w.errorf(e.keyNode, "%s: a key contains a NUL character, which jsonb cannot store", p.about(path))
				ok = false
			}
			b.WriteString(jsonString(e.key))
			b.WriteByte(':')
			if !p.value(e.value, t.Elem, path+"."+e.key, b) {
				ok = false
			}
		}
		b.WriteByte('}')
		return ok
	case KindShared:
		s := p.structs[t.Name]
		if s == nil {
			return false // an unknown type, reported where it is written
		}
		if n.Kind != yaml.MappingNode {
			return p.mismatch(n, path, t, "a mapping of its fields")
		}
		return p.object(n, s.Fields, "schedule payload", path, b)
	case KindExternal:
		p.w.errorf(n, "schedule payload: %s has the external type %s, whose JSON form skipjack cannot check; leave it out (it decodes to its zero value)", path, t)
		return false
	}
	return p.builtin(n, t, path, b)
}

// mismatch reports a value of the wrong form.
func (p *payloadEncoder) mismatch(n *yaml.Node, path string, t *TypeExpr, want string) bool {
	p.w.errorf(n, "%s (%s) must be %s, not %s", p.about(path), t, want, describe(n))
	return false
}

// intBits are the sizes of the integer types.
var intBits = map[string]int{
	"int": 64, "int8": 8, "int16": 16, "int32": 32, "int64": 64,
	"uint": 64, "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
}

// builtin encodes scalar n as a value of builtin type t.
func (p *payloadEncoder) builtin(n *yaml.Node, t *TypeExpr, path string, b *strings.Builder) bool {
	if t.Name == "json.RawMessage" {
		return p.raw(n, path, b)
	}
	if n.Kind != yaml.ScalarNode {
		return p.mismatch(n, path, t, "a single value")
	}
	tag, s := n.ShortTag(), n.Value
	switch name := t.Name; name {
	case "bool":
		v, err := strconv.ParseBool(s)
		if tag != "!!bool" || err != nil {
			return p.mismatch(n, path, t, "true or false")
		}
		b.WriteString(strconv.FormatBool(v))
	case "string":
		// An unquoted 2024-01-02 is a timestamp to YAML but text here.
		if tag != "!!str" && tag != "!!timestamp" {
			return p.mismatch(n, path, t, `a string (quote it: "`+s+`")`)
		}
		if strings.ContainsRune(s, 0) {
			p.w.errorf(n, "%s contains a NUL character, which jsonb cannot store", p.about(path))
			return false
		}
		b.WriteString(jsonString(s))
	case "int", "int8", "int16", "int32", "int64":
		v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, intBits[name])
		if tag != "!!int" || err != nil {
			return p.intError(n, path, t, tag, err)
		}
		b.WriteString(strconv.FormatInt(v, 10))
	case "uint", "uint8", "uint16", "uint32", "uint64":
		v, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 0, intBits[name])
		if tag == "!!int" && strings.HasPrefix(s, "-") {
			p.w.errorf(n, "%s (%s) must not be negative", p.about(path), t)
			return false
		}
		if tag != "!!int" || err != nil {
			return p.intError(n, path, t, tag, err)
		}
		b.WriteString(strconv.FormatUint(v, 10))
	case "float32", "float64":
		bits := 64
		if name == "float32" {
			bits = 32
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), bits)
		if tag != "!!int" && tag != "!!float" || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return p.mismatch(n, path, t, "a finite number")
		}
		var out []byte
		if bits == 32 {
			out, err = json.Marshal(float32(v))
		} else {
			out, err = json.Marshal(v)
		}
		if err != nil {
			return p.mismatch(n, path, t, "a finite number")
		}
		b.Write(out)
	case "[]byte":
		if tag != "!!str" && tag != "!!binary" {
			return p.mismatch(n, path, t, "a base64 string")
		}
		data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if err != nil {
			return p.mismatch(n, path, t, "a base64 string")
		}
		b.WriteString(jsonString(base64.StdEncoding.EncodeToString(data)))
	case "time.Time":
		v, err := time.Parse(time.RFC3339Nano, s)
		if tag != "!!str" && tag != "!!timestamp" || err != nil {
			return p.mismatch(n, path, t, "an RFC 3339 time such as 2024-01-02T15:04:05Z")
		}
		out, err := json.Marshal(v)
		if err != nil { // a year outside 0..9999
			return p.mismatch(n, path, t, "an RFC 3339 time such as 2024-01-02T15:04:05Z")
		}
		b.Write(out)
	case "time.Duration":
		v, err := time.ParseDuration(s)
		if tag != "!!str" || err != nil {
			return p.mismatch(n, path, t, "a Go duration such as 90s or 1h30m (stored as nanoseconds)")
		}
		b.WriteString(strconv.FormatInt(int64(v), 10))
	default:
		return p.mismatch(n, path, t, "a value skipjack can check")
	}
	return true
}

// intError reports a value that is not an integer of t's size.
func (p *payloadEncoder) intError(n *yaml.Node, path string, t *TypeExpr, tag string, err error) bool {
	if tag == "!!int" && err != nil {
		p.w.errorf(n, "%s (%s) is out of range: %s", p.about(path), t, n.Value)
		return false
	}
	return p.mismatch(n, path, t, "an integer")
}

// raw encodes any YAML value as JSON, for a json.RawMessage field. Mapping
// keys keep their written order.
func (p *payloadEncoder) raw(n *yaml.Node, path string, b *strings.Builder) bool {
	n = deref(n)
	if !p.visit(n) {
		return false
	}
	switch n.Kind {
	case yaml.MappingNode:
		ps, ok := p.w.pairs(n, "schedule payload: "+path, "key")
		b.WriteByte('{')
		for i, e := range ps {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(e.key))
			b.WriteByte(':')
			if !p.raw(e.value, path+"."+e.key, b) {
				ok = false
			}
		}
		b.WriteByte('}')
		return ok
	case yaml.SequenceNode:
		ok := true
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !p.raw(c, path+"["+strconv.Itoa(i)+"]", b) {
				ok = false
			}
		}
		b.WriteByte(']')
		return ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
			return true
		case "!!bool":
			return p.builtin(n, &TypeExpr{Kind: KindBuiltin, Name: "bool"}, path, b)
		case "!!int":
			digits := strings.ReplaceAll(n.Value, "_", "")
			if v, err := strconv.ParseInt(digits, 0, 64); err == nil {
				b.WriteString(strconv.FormatInt(v, 10))
				return true
			}
			if v, err := strconv.ParseUint(digits, 0, 64); err == nil {
				b.WriteString(strconv.FormatUint(v, 10))
				return true
			}
			return p.builtin(n, &TypeExpr{Kind: KindBuiltin, Name: "float64"}, path, b)
		case "!!float":
			return p.builtin(n, &TypeExpr{Kind: KindBuiltin, Name: "float64"}, path, b)
		default:
			return p.builtin(n, &TypeExpr{Kind: KindBuiltin, Name: "string"}, path, b)
		}
	}
	p.w.errorf(n, "schedule payload: %s must be plain YAML data", path)
	return false
}

// jsonString encodes s as a JSON string, as encoding/json does.
func jsonString(s string) string {
	out, _ := json.Marshal(s) // a string always encodes
	return string(out)
}
