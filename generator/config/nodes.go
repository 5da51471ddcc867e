package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// walker walks the YAML node tree and collects every problem it finds.
type walker struct {
	file string
	errs Errors
}

// errorAt records a problem at p.
func (w *walker) errorAt(p Pos, format string, args ...any) {
	w.errs = append(w.errs, Error{File: w.file, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf(format, args...)})
}

// errorf records a problem at node n.
func (w *walker) errorf(n *yaml.Node, format string, args ...any) {
	w.errorAt(pos(n), format, args...)
}

// pos is where n is written.
func pos(n *yaml.Node) Pos {
	return Pos{Line: n.Line, Col: n.Column}
}

// deref follows aliases to the node they stand for.
func deref(n *yaml.Node) *yaml.Node {
	// Anchors cannot nest without bound in a finite file, but a cap keeps
	// a malformed tree from looping.
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is absent or an explicit null (a key with no
// value).
func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names the kind of n for "must be a mapping, not ..." messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "empty"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "something else"
}

// entry is one key/value pair of a mapping.
type entry struct {
	key     string
	keyNode *yaml.Node
	value   *yaml.Node
}

// pairs returns the pairs of mapping n in file order. what names n in the
// "must be a mapping" error; noun names its keys in duplicate-key errors. A
// null n has no pairs. Duplicate and non-string keys are reported and left
// out.
func (w *walker) pairs(n *yaml.Node, what, noun string) ([]entry, bool) {
	n = deref(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		w.errorf(n, "%s must be a mapping, not %s", what, describe(n))
		return nil, false
	}
	var out []entry
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode || isNull(k) {
			w.errorf(n.Content[i], "%s names must be plain strings", noun)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			w.errorf(k, "duplicate %s %q (first on line %d)", noun, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, entry{key: k.Value, keyNode: k, value: v})
	}
	return out, true
}

// section returns the pairs of mapping n by key, reporting keys that are not
// among known.
func (w *walker) section(n *yaml.Node, what string, known []string) (map[string]entry, bool) {
	ps, ok := w.pairs(n, what, "key")
	out := make(map[string]entry, len(ps))
	for _, p := range ps {
		if !contains(known, p.key) {
			w.errorf(p.keyNode, "unknown key %q in %s%s", p.key, what, didYouMean(p.key, known))
			continue
		}
		out[p.key] = p
	}
	return out, ok
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scalar returns e's value as written, reporting anything but a non-null
// scalar.
func (w *walker) scalar(e entry, want string) (string, bool) {
	if e.value == nil || e.value.Kind != yaml.ScalarNode || isNull(e.value) {
		at := e.value
		if at == nil {
			at = e.keyNode
		}
		w.errorf(at, "%s must be %s, not %s", e.key, want, describeOr(e.value))
		return "", false
	}
	return e.value.Value, true
}

// describeOr is describe, tolerating a missing node.
func describeOr(n *yaml.Node) string {
	if n == nil {
		return "empty"
	}
	return describe(n)
}

// str returns e's value as a string.
func (w *walker) str(e entry) (string, bool) {
	return w.scalar(e, "a string")
}

// integer returns e's value as an int.
func (w *walker) integer(e entry) (int, bool) {
	s, ok := w.scalar(e, "an integer")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
	if e.value.ShortTag() != "!!int" || err != nil || n < math.MinInt32 || n > math.MaxInt32 {
		w.errorf(e.value, "%s must be an integer, not %s", e.key, describe(e.value))
		return 0, false
	}
	return int(n), true
}

// boolean returns e's value as a bool.
func (w *walker) boolean(e entry) (bool, bool) {
	s, ok := w.scalar(e, "true or false")
	if !ok {
		return false, false
	}
	b, err := strconv.ParseBool(s)
	if e.value.ShortTag() != "!!bool" || err != nil {
		w.errorf(e.value, "%s must be true or false, not %s", e.key, describe(e.value))
		return false, false
	}
	return b, true
}

// number returns e's value as a float64.
func (w *walker) number(e entry) (float64, bool) {
	s, ok := w.scalar(e, "a number")
	if !ok {
		return 0, false
	}
	tag := e.value.ShortTag()
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if tag != "!!int" && tag != "!!float" || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		w.errorf(e.value, "%s must be a number, not %s", e.key, describe(e.value))
		return 0, false
	}
	return f, true
}

// duration returns e's value as a non-negative Go duration such as 90s,
// 5m or 1h30m.
func (w *walker) duration(e entry) (time.Duration, bool) {
	s, ok := w.scalar(e, "a duration")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		w.errorf(e.value, "%s: invalid duration %q (use Go syntax such as 500ms, 90s, 5m or 1h30m)", e.key, s)
		return 0, false
	}
	if d < 0 {
		w.errorf(e.value, "%s must not be negative", e.key)
		return 0, false
	}
	return d, true
}

// item is one scalar of a list, with the node it is written at.
type item struct {
	value string
	node  *yaml.Node
}

// stringList returns e's value as a list of strings such as [a, b],
// reporting a value that is not a list and items that are not strings.
func (w *walker) stringList(e entry, example string) ([]item, bool) {
	n := e.value
	if n == nil || n.Kind != yaml.SequenceNode {
		at := n
		if at == nil {
			at = e.keyNode
		}
		w.errorf(at, "%s must be a list such as %s, not %s", e.key, example, describeOr(n))
		return nil, false
	}
	var out []item
	ok := true
	for _, c := range n.Content {
		c = deref(c)
		if c == nil || c.Kind != yaml.ScalarNode || isNull(c) || c.ShortTag() != "!!str" {
			at := c
			if at == nil {
				at = n
			}
			w.errorf(at, "%s must list strings, not %s", e.key, describeOr(c))
			ok = false
			continue
		}
		out = append(out, item{value: c.Value, node: c})
	}
	return out, ok
}
