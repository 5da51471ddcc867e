// Package compat decides which YAML changes break jobs already queued, and
// keeps the lock file that records what those jobs may hold.
//
// Jobs enqueued by one version of a service are worked by the next during a
// rolling deploy, and by the previous one again after a rollback, so a
// payload must keep decoding both ways. encoding/json ignores unknown keys
// and leaves missing fields at their zero value, which makes these changes
// breaking (they fail to decode, or silently decode as zero values):
//
//   - removing or renaming a field, unless the lock recorded it as
//     deprecated (the deliberate way: deprecate, deploy, drain, remove);
//   - changing a field's type: another kind, another integer width, to or
//     from a pointer, other element types, other fields of a struct;
//   - adding a required (non-nilable) field without a default, which jobs
//     already queued lack, or removing the default of a field;
//   - removing a queue without dropped: true;
//   - adding or changing a unique key, whose index cannot be built while
//     queued jobs hold duplicates of the new key.
//
// Adding a pointer, slice, map, []byte or json.RawMessage field is safe: a
// job without it decodes it as nil, which the field can already hold. So is
// adding a field with a default, which a job without it decodes with; the
// lock records the default, and removing it again is breaking.
//
// The generator calls Breaking before it renders anything and writes the
// file Lock returns with the generated code.
package compat

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// Change is one change of the YAML that would break jobs already queued.
type Change struct {
	// Pos is where the change is written in the YAML file.
	Pos config.Pos
	// Msg says what changed and why it breaks jobs already queued.
	Msg string
}

// Breaking reads cfg's lock file and returns every change of cfg against
// it that would break jobs already queued, sorted by position. Before the
// first generate there is no lock file, and nothing breaks.
func Breaking(cfg *config.Config) ([]Change, error) {
	old, err := readLock(cfg)
	if err != nil || old == nil {
		return nil, err
	}
	return breakingChanges(cfg, old), nil
}

// shapeField is a payload or struct field on either side of a comparison.
type shapeField struct {
	key        string
	typ        *config.TypeExpr
	deprecated bool
	// defaulted marks a field with a default, which a job without it
	// decodes with.
	defaulted bool
	// pos is where the field is written in the YAML (zero for the lock).
	pos config.Pos
}

// comparison compares the YAML with the lock of the last generate.
type comparison struct {
	cfg *config.Config
	// old and cur are the lock as recorded and as the YAML would write it.
	old, cur *payloadLock
	// oldStructs and curStructs are the shared structs of each side.
	oldStructs map[string][]shapeField
	curStructs map[string][]shapeField
	// structPos is where each shared struct of the YAML is written.
	structPos map[string]config.Pos
	changes   []Change
}

// breakingChanges returns every change of cfg against the recorded lock
// old that would break jobs already queued, sorted by position.
func breakingChanges(cfg *config.Config, old *payloadLock) []Change {
	c := &comparison{
		cfg:        cfg,
		old:        old,
		cur:        lockOf(cfg),
		oldStructs: map[string][]shapeField{},
		curStructs: map[string][]shapeField{},
		structPos:  map[string]config.Pos{},
	}
	oldNames := c.oldNames()
	for _, s := range old.types {
		c.oldStructs[s.name] = lockShape(s.fields, oldNames)
	}
	for _, s := range cfg.Types {
		c.curStructs[s.Name] = configShape(s.Fields)
		c.structPos[s.Name] = s.Pos
	}
	c.compare()
	slices.SortStableFunc(c.changes, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Col, b.Pos.Col))
	})
	return c.changes
}

// lockShape turns recorded fields into shape fields; names are the
// recorded shared structs.
func lockShape(fields []lockField, names []string) []shapeField {
	out := make([]shapeField, 0, len(fields))
	for _, f := range fields {
		t, err := config.ParseType(f.typ, names)
		if err != nil {
			continue // parseLock has checked every type
		}
		out = append(out, shapeField{key: f.key, typ: t, defaulted: f.defaulted, deprecated: f.deprecated})
	}
	return out
}

// configShape turns fields of the YAML into shape fields.
func configShape(fields []config.Field) []shapeField {
	out := make([]shapeField, len(fields))
	for i, f := range fields {
		out[i] = shapeField{key: f.Key, typ: f.Type, deprecated: f.Deprecated, defaulted: f.Default != "", pos: f.Pos}
	}
	return out
}

// add records a breaking change.
func (c *comparison) add(pos config.Pos, format string, args ...any) {
	c.changes = append(c.changes, Change{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

// compare finds every breaking change.
func (c *comparison) compare() {
	queues := map[string]*config.Queue{}
	for i := range c.cfg.Queues {
		queues[c.cfg.Queues[i].Name] = &c.cfg.Queues[i]
	}
	oldNames := c.oldNames()
	for _, oq := range c.old.queues {
		q := queues[oq.name]
		if q == nil {
			c.add(c.cfg.QueuesPos, "queue %q was removed, but jobs may still be queued in its table; declare it with dropped: true so that the next migration drops the table", oq.name)
			continue
		}
		if q.Dropped {
			continue // the deliberate way to remove a queue
		}
		owner := fmt.Sprintf("queue %q", q.Name)
		c.changes = append(c.changes, c.compareFields(owner, q.Pos, lockShape(oq.fields, oldNames), configShape(q.Payload), map[[2]string]bool{})...)
		c.compareUnique(oq, q)
	}
	// A shared struct used on both sides is compared once, where it is
	// declared, whichever queues use it.
	used := map[string]bool{}
	for _, s := range c.cur.types {
		used[s.name] = true
	}
	for _, s := range c.old.types {
		if !used[s.name] {
			continue
		}
		owner := fmt.Sprintf("type %q", s.name)
		c.changes = append(c.changes, c.compareFields(owner, c.structPos[s.name], c.oldStructs[s.name], c.curStructs[s.name], map[[2]string]bool{})...)
	}
}

// oldNames are the shared structs the lock records.
func (c *comparison) oldNames() []string {
	names := make([]string, len(c.old.types))
	for i, s := range c.old.types {
		names[i] = s.name
	}
	return names
}

// compareFields compares the fields of one payload or struct (owner names
// it in messages; removals are reported at at). seen holds the pairs of
// differently named structs being compared, which ends recursion.
func (c *comparison) compareFields(owner string, at config.Pos, old, cur []shapeField, seen map[[2]string]bool) []Change {
	var out []Change
	add := func(pos config.Pos, format string, args ...any) {
		out = append(out, Change{Pos: pos, Msg: fmt.Sprintf(format, args...)})
	}
	oldByKey := map[string]shapeField{}
	for _, f := range old {
		oldByKey[f.key] = f
	}
	curByKey := map[string]shapeField{}
	for _, f := range cur {
		curByKey[f.key] = f
	}
	renamedTo := map[string]bool{}
	for i, of := range old {
		nf, ok := curByKey[of.key]
		if ok {
			if why := c.diffType(of.typ, nf.typ, seen); why != "" {
				add(nf.pos, "field %q of %s changed type from %s to %s: %s", of.key, owner, of.typ, nf.typ, why)
			} else if of.defaulted && !nf.defaulted && !nf.typ.Nilable() {
				add(nf.pos, "field %q of %s lost its default: jobs already queued without it (by an older release or by SQL) would decode it as its zero value; keep the default", of.key, owner)
			}
			continue
		}
		if of.deprecated {
			continue // deprecated before: removing it now is the plan
		}
		// A new field of the same type in the removed one's place is
		// most likely the same field renamed.
		if i < len(cur) {
			if _, existed := oldByKey[cur[i].key]; !existed && c.diffType(of.typ, cur[i].typ, seen) == "" {
				renamedTo[cur[i].key] = true
				add(cur[i].pos, "field %q of %s was renamed to %q: jobs already queued carry %q and would decode %q as its zero value; keep %q, marked deprecated: true, next to the new field until the queue has drained",
					of.key, owner, cur[i].key, of.key, cur[i].key, of.key)
				continue
			}
		}
		add(at, "field %q of %s was removed, but jobs already queued carry it; keep it, marked deprecated: true, until the queue has drained", of.key, owner)
	}
	for _, nf := range cur {
		if _, existed := oldByKey[nf.key]; existed || renamedTo[nf.key] || nf.typ.Nilable() || nf.defaulted {
			continue
		}
		add(nf.pos, "field %q of %s is new and required: jobs already queued lack it and would decode it as its zero value; make it optional (\"*%s\")%s", nf.key, owner, nf.typ, orDefault(nf.typ))
	}
	return out
}

// orDefault suggests a default for a new field of type t, when t can have
// one.
func orDefault(t *config.TypeExpr) string {
	if !t.Defaultable() {
		return ""
	}
	return fmt.Sprintf(" or give it a default ({type: %s, default: ...})", t)
}

// diffType says why a value encoded as old may not decode as cur, or
// returns "" when it always does (both ways).
func (c *comparison) diffType(old, cur *config.TypeExpr, seen map[[2]string]bool) string {
	switch {
	case old.Kind == config.KindPointer && cur.Kind != config.KindPointer:
		if c.diffType(old.Elem, cur, seen) == "" {
			return "it is no longer optional, so a job queued with null would decode as the zero value"
		}
	case old.Kind != config.KindPointer && cur.Kind == config.KindPointer:
		if c.diffType(old, cur.Elem, seen) == "" {
			return "it is now optional, so workers still running the previous version would decode null as the zero value"
		}
	}
	if old.Kind != cur.Kind {
		return fmt.Sprintf("a JSON value of %s does not decode as %s", old, cur)
	}
	switch old.Kind {
	case config.KindPointer, config.KindSlice, config.KindMap:
		return c.diffType(old.Elem, cur.Elem, seen)
	case config.KindExternal:
		if old.ImportPath != cur.ImportPath || old.Name != cur.Name {
			return fmt.Sprintf("a JSON value of %s may not decode as %s", old, cur)
		}
	case config.KindShared:
		if old.Name == cur.Name {
			return "" // compared where the struct is declared
		}
		key := [2]string{old.Name, cur.Name}
		if seen[key] {
			return ""
		}
		seen[key] = true
		changes := c.compareFields(fmt.Sprintf("type %q", cur.Name), config.Pos{}, c.oldStructs[old.Name], c.curStructs[cur.Name], seen)
		if len(changes) > 0 {
			return fmt.Sprintf("%s and %s differ: %s", old.Name, cur.Name, changes[0].Msg)
		}
	case config.KindBuiltin:
		switch {
		case old.Name == cur.Name:
		case isInteger(old.Name) && isInteger(cur.Name):
			return "the two integer types hold different ranges, and a rolling deploy runs both, so a value that fits one may not decode as the other"
		case strings.HasPrefix(old.Name, "float") && strings.HasPrefix(cur.Name, "float"):
			return "the two float types hold different ranges and precisions, and a rolling deploy runs both"
		default:
			return fmt.Sprintf("a JSON value of %s does not decode as %s", old, cur)
		}
	}
	return ""
}

// isInteger reports whether a builtin is an integer type.
func isInteger(name string) bool {
	return strings.HasPrefix(name, "int") || strings.HasPrefix(name, "uint")
}

// compareUnique compares a queue's unique key with the recorded one.
func (c *comparison) compareUnique(oq lockQueue, q *config.Queue) {
	o, n := oq.unique, q.Unique
	if n == nil {
		return // dropping a unique key breaks no job
	}
	if o == nil {
		c.add(n.Pos, "queue %q now has a unique key: jobs already queued may hold duplicates of it, and the migration cannot build its unique index over them", q.Name)
		return
	}
	if !sameSet(o.by, n.By) {
		c.add(n.Pos, "the unique key of queue %q changed from %s to %s: jobs already queued were deduplicated by the old key, and the migration cannot build the new unique index while they hold duplicates of the new one",
			q.Name, describeKey(o.by), describeKey(n.By))
	} else if len(n.By) == 0 && c.old.shapeOf(oq.name) != c.cur.shapeOf(q.Name) {
		c.add(n.Pos, "the unique key of queue %q is the whole payload, and the payload changed: jobs queued before this change would never count as duplicates of jobs queued after it", q.Name)
	}
	var added []string
	for _, s := range n.States {
		if !slices.Contains(o.states, s) {
			added = append(added, s)
		}
	}
	if len(added) > 0 {
		c.add(n.Pos, "unique.states of queue %q now also has %s: the migration cannot build the wider unique index while such jobs hold duplicates", q.Name, strings.Join(added, " and "))
	}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// describeKey spells a unique key in messages.
func describeKey(by []string) string {
	if len(by) == 0 {
		return "the whole payload"
	}
	return "(" + strings.Join(by, ", ") + ")"
}

// shapeOf is the JSON shape of a queue's payload: the paths and types of
// its fields and of the fields of the shared structs it reaches,
// independent of field order, deprecation and struct names, none of which
// change the encoding.
func (l *payloadLock) shapeOf(queue string) string {
	names := make([]string, len(l.types))
	structs := map[string][]lockField{}
	for i, s := range l.types {
		names[i] = s.name
		structs[s.name] = s.fields
	}
	var parts []string
	seen := map[string]bool{}
	var walk func(prefix string, fields []lockField)
	walk = func(prefix string, fields []lockField) {
		for _, f := range fields {
			t, err := config.ParseType(f.typ, names)
			if err != nil {
				continue // parseLock has checked every type
			}
			parts = append(parts, prefix+f.key+" "+spellShape(t))
			for ; t != nil; t = t.Elem {
				if t.Kind == config.KindShared && !seen[t.Name] {
					seen[t.Name] = true
					walk(prefix+f.key+".", structs[t.Name])
				}
			}
		}
	}
	for _, q := range l.queues {
		if q.name == queue {
			walk("", q.fields)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\n")
}

// spellShape spells t with every shared struct as "struct".
func spellShape(t *config.TypeExpr) string {
	switch t.Kind {
	case config.KindPointer:
		return "*" + spellShape(t.Elem)
	case config.KindSlice:
		return "[]" + spellShape(t.Elem)
	case config.KindMap:
		return "map[string]" + spellShape(t.Elem)
	case config.KindShared:
		return "struct"
	}
	return t.String()
}
