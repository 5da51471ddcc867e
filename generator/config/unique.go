package config

import (
	"slices"
	"strings"
)

// UniqueStates are the states unique.states accepts, in the order
// Unique.States lists them.
var UniqueStates = []string{"pending", "running", "completed", "failed"}

// DefaultUniqueStates are the states of a unique key that does not list
// them.
var DefaultUniqueStates = []string{"pending", "running"}

// uniqueKeys are the keys of a queue's unique: section.
var uniqueKeys = []string{"by", "states"}

// unique walks a queue's unique: section; q's payload and retention are
// already walked.
func (w *walker) unique(e entry, q *Queue) *Unique {
	u := &Unique{States: slices.Clone(DefaultUniqueStates), Pos: pos(e.keyNode)}
	if isNull(e.value) {
		w.errorf(e.keyNode, `unique must be a mapping such as {by: [user_id]}; write "unique: {}" to make the whole payload the key`)
		return u
	}
	s, _ := w.section(e.value, "unique", uniqueKeys)
	if by, ok := s["by"]; ok {
		u.By = w.keyFields(by, q.Payload, "unique")
	}
	if states, ok := s["states"]; ok {
		if list, ok := w.uniqueStates(states, q); ok {
			u.States = list
		}
	}
	return u
}

// keyFields checks the payload fields listed by the by: key of section
// (unique or serial) that make up a key, and returns them in the order
// written.
func (w *walker) keyFields(e entry, payload []Field, section string) []string {
	items, ok := w.stringList(e, "[user_id, week]")
	if ok && len(items) == 0 {
		switch section {
		case "unique":
			w.errorf(e.value, "unique.by lists no fields; leave by out to make the whole payload the key")
		case "limits.per_key":
			w.errorf(e.value, "limits.per_key.by lists no fields; list the payload fields whose equal values make a key")
		default:
			w.errorf(e.value, "%s.by lists no fields; list the payload fields whose equal values make jobs run one at a time", section)
		}
		return nil
	}
	keys := make([]string, len(payload))
	for i, f := range payload {
		keys[i] = f.Key
	}
	var by []string
	seen := make(map[string]int)
	for _, it := range items {
		if line, dup := seen[it.value]; dup {
			w.errorf(it.node, "duplicate field %q in %s.by (first on line %d)", it.value, section, line)
			continue
		}
		seen[it.value] = it.node.Line
		i := slices.Index(keys, it.value)
		if i < 0 {
			w.errorf(it.node, "unknown field %q in %s.by: the payload has no such field%s", it.value, section, didYouMean(it.value, keys))
			continue
		}
		if t := payload[i].Type; t != nil {
			if why := keyProblem(t); why != "" {
				w.errorf(it.node, "field %q (%s) cannot be part of a %s key: %s", it.value, t, section, why)
				continue
			}
		}
		by = append(by, it.value)
	}
	return by
}

// keyProblem says why a field of type t cannot be part of a unique or
// serial key, or returns "". A key must have one JSON spelling per value,
// so that equal values make equal keys in the key's index.
func keyProblem(t *TypeExpr) string {
	switch t.Kind {
	case KindPointer:
		return keyProblem(t.Elem)
	case KindSlice, KindMap:
		return "lists and maps are not keys; list scalar fields instead"
	case KindShared:
		return "structs are not keys; list scalar fields instead"
	case KindExternal:
		return "skipjack does not know how its type is spelled in JSON"
	}
	switch t.Name {
	case "float32", "float64":
		return "floating-point values that print alike may differ; use an integer or a string"
	case "[]byte", "json.RawMessage":
		return "only bool, string, integer, time.Time and time.Duration fields (or pointers to them) are keys"
	}
	return ""
}

// uniqueStates checks unique.states and returns it in the order of
// UniqueStates.
func (w *walker) uniqueStates(e entry, q *Queue) ([]string, bool) {
	items, ok := w.stringList(e, "[pending, running]")
	if !ok {
		return nil, false
	}
	if len(items) == 0 {
		w.errorf(e.value, "unique.states lists no states; leave it out for pending and running")
		return nil, false
	}
	seen := make(map[string]int)
	for _, it := range items {
		if line, dup := seen[it.value]; dup {
			w.errorf(it.node, "duplicate state %q in unique.states (first on line %d)", it.value, line)
			ok = false
			continue
		}
		seen[it.value] = it.node.Line
		switch it.value {
		case "pending", "running":
		case "completed":
			if q.RetainCompleted == 0 {
				w.errorf(it.node, "unique.states has completed, but this queue deletes completed jobs at once (retention.completed is 0s); set retention.completed to keep them")
				ok = false
			}
		case "failed":
			if q.RetainFailed == 0 {
				w.errorf(it.node, "unique.states has failed, but this queue deletes failed jobs at once (retention.failed is 0s); set retention.failed to keep them")
				ok = false
			}
		default:
			w.errorf(it.node, "unknown state %q in unique.states: use %s%s", it.value, strings.Join(UniqueStates, ", "), didYouMean(it.value, UniqueStates))
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	for _, required := range DefaultUniqueStates {
		if _, has := seen[required]; !has {
			w.errorf(e.value, "unique.states must include pending and running: every claim and retry moves a job between them, and a move into the unique index could fail")
			return nil, false
		}
	}
	var states []string
	for _, s := range UniqueStates {
		if _, has := seen[s]; has {
			states = append(states, s)
		}
	}
	return states, true
}
