package compat

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// compatHead starts every config of TestBreakingChanges.
const compatHead = "version: 1\nout: ./jobs\n"

// breakingOf parses before and after, records before's lock as generate
// would (rendered and parsed back) and returns after's breaking changes
// as "line:col: message".
func breakingOf(t *testing.T, before, after string) []string {
	t.Helper()
	old, err := config.Parse("skipjack.yaml", []byte(before))
	if err != nil {
		t.Fatalf("parse before:\n%v", err)
	}
	cur, err := config.Parse("skipjack.yaml", []byte(after))
	if err != nil {
		t.Fatalf("parse after:\n%v", err)
	}
	lock, err := parseLock(lockOf(old).render())
	if err != nil {
		t.Fatalf("parse the rendered lock: %v", err)
	}
	var got []string
	for _, ch := range breakingChanges(cur, lock) {
		got = append(got, fmt.Sprintf("%d:%d: %s", ch.Pos.Line, ch.Pos.Col, ch.Msg))
	}
	return got
}

func TestBreakingChangesSafe(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, before, after string }{
		{
			name:   "unchanged",
			before: "queues:\n  a:\n    payload: {to: string, n: int64}\n",
			after:  "queues:\n  a:\n    payload: {to: string, n: int64}\n",
		},
		{
			name:   "optional fields added",
			before: "queues:\n  a:\n    payload: {to: string}\n",
			after:  "queues:\n  a:\n    payload: {to: string, cc: \"*string\", tags: \"[]string\", meta: \"map[string]int\", raw: json.RawMessage, data: \"[]byte\"}\n",
		},
		{
			name:   "field deprecated",
			before: "queues:\n  a:\n    payload: {to: string, cc: string}\n",
			after:  "queues:\n  a:\n    payload: {to: string, cc: {type: string, deprecated: true}}\n",
		},
		{
			name:   "deprecated field removed",
			before: "queues:\n  a:\n    payload: {to: string, cc: {type: string, deprecated: true}}\n",
			after:  "queues:\n  a:\n    payload: {to: string}\n",
		},
		{
			name:   "deprecation withdrawn",
			before: "queues:\n  a:\n    payload: {to: {type: string, deprecated: true}}\n",
			after:  "queues:\n  a:\n    payload: {to: string}\n",
		},
		{
			name:   "fields reordered",
			before: "queues:\n  a:\n    payload: {to: string, n: int64}\n",
			after:  "queues:\n  a:\n    payload: {n: int64, to: string}\n",
		},
		{
			name:   "shared struct renamed, same fields",
			before: "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {ship_to: Address}\n",
			after:  "types:\n  PostalAddress: {street: string}\nqueues:\n  a:\n    payload: {ship_to: PostalAddress}\n",
		},
		{
			name:   "shared struct gains an optional field",
			before: "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {ship_to: Address}\n",
			after:  "types:\n  Address: {street: string, zip: \"*string\"}\nqueues:\n  a:\n    payload: {ship_to: Address}\n",
		},
		{
			name:   "recursive struct unchanged",
			before: "types:\n  Node: {next: \"*Node\", kids: \"[]Node\"}\nqueues:\n  a:\n    payload: {root: Node}\n",
			after:  "types:\n  Tree: {next: \"*Tree\", kids: \"[]Tree\"}\nqueues:\n  a:\n    payload: {root: Tree}\n",
		},
		{
			name:   "unused shared struct changed",
			before: "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {to: string}\n",
			after:  "types:\n  Address: {city: int}\nqueues:\n  a:\n    payload: {to: string}\n",
		},
		{
			name:   "queue dropped deliberately",
			before: "queues:\n  a: {}\n  b:\n    payload: {n: int}\n",
			after:  "queues:\n  a: {}\n  b:\n    dropped: true\n",
		},
		{
			name:   "queue added",
			before: "queues:\n  a: {}\n",
			after:  "queues:\n  a: {}\n  b:\n    payload: {n: int}\n",
		},
		{
			name:   "unique key removed, reordered or narrowed",
			before: "queues:\n  a:\n    payload: {u: int64, w: string}\n    retention: {completed: 1h}\n    unique: {by: [u, w], states: [pending, running, completed]}\n  b:\n    payload: {u: int64}\n    unique: {}\n",
			after:  "queues:\n  a:\n    payload: {u: int64, w: string}\n    retention: {completed: 1h}\n    unique: {by: [w, u]}\n  b:\n    payload: {u: int64}\n",
		},
		{
			name:   "whole-payload unique key, payload unchanged but deprecated",
			before: "queues:\n  a:\n    payload: {u: int64}\n    unique: {}\n",
			after:  "queues:\n  a:\n    payload: {u: {type: int64, deprecated: true}}\n    unique: {}\n",
		},
		{
			name:   "external type unchanged",
			before: "queues:\n  a:\n    payload: {id: github.com/google/uuid.UUID}\n",
			after:  "queues:\n  a:\n    payload: {id: github.com/google/uuid.UUID}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := breakingOf(t, compatHead+tt.before, compatHead+tt.after); len(got) > 0 {
				t.Errorf("breaking changes reported for a safe change:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

func TestBreakingChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, before, after string
		want                []string
	}{
		{
			name:   "field removed",
			before: "queues:\n  a:\n    payload: {to: string, cc: string}\n",
			after:  "queues:\n  a:\n    payload: {to: string}\n",
			want:   []string{`4:3: field "cc" of queue "a" was removed, but jobs already queued carry it; keep it, marked deprecated: true, until the queue has drained`},
		},
		{
			name:   "optional field removed",
			before: "queues:\n  a:\n    payload: {to: string, cc: \"*string\"}\n",
			after:  "queues:\n  a:\n    payload: {to: string}\n",
			want:   []string{`4:3: field "cc" of queue "a" was removed, but jobs already queued carry it; keep it, marked deprecated: true, until the queue has drained`},
		},
		{
			name:   "field renamed",
			before: "queues:\n  a:\n    payload: {to: string, n: int}\n",
			after:  "queues:\n  a:\n    payload: {recipient: string, n: int}\n",
			want:   []string{`5:26: field "to" of queue "a" was renamed to "recipient": jobs already queued carry "to" and would decode "recipient" as its zero value; keep "to", marked deprecated: true, next to the new field until the queue has drained`},
		},
		{
			name:   "integer widened",
			before: "queues:\n  a:\n    payload: {n: int32}\n",
			after:  "queues:\n  a:\n    payload: {n: int64}\n",
			want:   []string{`5:18: field "n" of queue "a" changed type from int32 to int64: the two integer types hold different ranges, and a rolling deploy runs both, so a value that fits one may not decode as the other`},
		},
		{
			name:   "string to integer",
			before: "queues:\n  a:\n    payload: {n: string}\n",
			after:  "queues:\n  a:\n    payload: {n: int64}\n",
			want:   []string{`5:18: field "n" of queue "a" changed type from string to int64: a JSON value of string does not decode as int64`},
		},
		{
			name:   "pointer made required",
			before: "queues:\n  a:\n    payload: {at: \"*time.Time\"}\n",
			after:  "queues:\n  a:\n    payload: {at: time.Time}\n",
			want:   []string{`5:19: field "at" of queue "a" changed type from *time.Time to time.Time: it is no longer optional, so a job queued with null would decode as the zero value`},
		},
		{
			name:   "required made pointer",
			before: "queues:\n  a:\n    payload: {at: time.Time}\n",
			after:  "queues:\n  a:\n    payload: {at: \"*time.Time\"}\n",
			want:   []string{`5:19: field "at" of queue "a" changed type from time.Time to *time.Time: it is now optional, so workers still running the previous version would decode null as the zero value`},
		},
		{
			name:   "slice and map elements",
			before: "queues:\n  a:\n    payload: {ids: \"[]int32\", m: \"map[string]string\", p: \"[]*bool\"}\n",
			after:  "queues:\n  a:\n    payload: {ids: \"[]int64\", m: \"map[string][]string\", p: \"[]bool\"}\n",
			want: []string{
				`5:20: field "ids" of queue "a" changed type from []int32 to []int64: the two integer types hold different ranges, and a rolling deploy runs both, so a value that fits one may not decode as the other`,
				`5:34: field "m" of queue "a" changed type from map[string]string to map[string][]string: a JSON value of string does not decode as []string`,
				`5:60: field "p" of queue "a" changed type from []*bool to []bool: it is no longer optional, so a job queued with null would decode as the zero value`,
			},
		},
		{
			name:   "required field added",
			before: "queues:\n  a:\n    payload: {to: string}\n",
			after:  "queues:\n  a:\n    payload: {to: string, n: int64}\n",
			want:   []string{`5:30: field "n" of queue "a" is new and required: jobs already queued lack it and would decode it as its zero value; make it optional ("*int64") or give it a default ({type: int64, default: ...})`},
		},
		{
			name:   "fields added with a default",
			before: "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {to: string, ship_to: Address}\n",
			after:  "types:\n  Address: {street: string, country: {type: string, default: DE}}\nqueues:\n  a:\n    payload: {to: string, ship_to: Address, reply_to: {type: string, default: x}, n: {type: int64, default: 3}}\n",
		},
		{
			name:   "default removed",
			before: "queues:\n  a:\n    payload: {to: string, reply_to: {type: string, default: x}, n: {type: int64, default: 3}}\n",
			after:  "queues:\n  a:\n    payload: {to: string, reply_to: string, n: {type: int64, default: 4}}\n",
			want:   []string{`5:37: field "reply_to" of queue "a" lost its default: jobs already queued without it (by an older release or by SQL) would decode it as its zero value; keep the default`},
		},
		{
			name: "shared struct fields, reported once where declared",
			// city -> country: a new field of the same type in the place
			// of a removed one reads as a rename.
			before: "types:\n  Address: {street: string, zip: string, city: string}\nqueues:\n  a:\n    payload: {ship_to: Address}\n  b:\n    payload: {bill_to: \"*Address\"}\n",
			after:  "types:\n  Address:\n    street: string\n    zip: int\n    country: string\nqueues:\n  a:\n    payload: {ship_to: Address}\n  b:\n    payload: {bill_to: \"*Address\"}\n",
			want: []string{
				`6:10: field "zip" of type "Address" changed type from string to int: a JSON value of string does not decode as int`,
				`7:14: field "city" of type "Address" was renamed to "country": jobs already queued carry "city" and would decode "country" as its zero value; keep "city", marked deprecated: true, next to the new field until the queue has drained`,
			},
		},
		{
			name:   "field removed and a required one added elsewhere",
			before: "queues:\n  a:\n    payload: {to: string, cc: string}\n",
			after:  "queues:\n  a:\n    payload: {n: int, to: string}\n",
			want: []string{
				`4:3: field "cc" of queue "a" was removed, but jobs already queued carry it; keep it, marked deprecated: true, until the queue has drained`,
				`5:18: field "n" of queue "a" is new and required: jobs already queued lack it and would decode it as its zero value; make it optional ("*int") or give it a default ({type: int, default: ...})`,
			},
		},
		{
			name:   "nested shared struct",
			before: "types:\n  Order: {lines: \"[]Line\"}\n  Line: {sku: string}\nqueues:\n  a:\n    payload: {order: Order}\n",
			after:  "types:\n  Order: {lines: \"[]Line\"}\n  Line: {sku: int64}\nqueues:\n  a:\n    payload: {order: Order}\n",
			want:   []string{`5:15: field "sku" of type "Line" changed type from string to int64: a JSON value of string does not decode as int64`},
		},
		{
			name:   "field switched to a different struct",
			before: "types:\n  Address: {street: string}\n  Place: {lat: float64}\nqueues:\n  a:\n    payload: {ship_to: Address}\n",
			after:  "types:\n  Address: {street: string}\n  Place: {lat: float64}\nqueues:\n  a:\n    payload: {ship_to: Place}\n",
			want:   []string{`8:24: field "ship_to" of queue "a" changed type from Address to Place: Address and Place differ: field "street" of type "Place" was removed, but jobs already queued carry it; keep it, marked deprecated: true, until the queue has drained`},
		},
		{
			name:   "shared struct to map",
			before: "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {ship_to: Address}\n",
			after:  "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload: {ship_to: \"map[string]string\"}\n",
			want:   []string{`7:24: field "ship_to" of queue "a" changed type from Address to map[string]string: a JSON value of Address does not decode as map[string]string`},
		},
		{
			name:   "external type changed",
			before: "queues:\n  a:\n    payload: {id: github.com/google/uuid.UUID}\n",
			after:  "queues:\n  a:\n    payload: {id: github.com/gofrs/uuid.UUID}\n",
			want:   []string{`5:19: field "id" of queue "a" changed type from github.com/google/uuid.UUID to github.com/gofrs/uuid.UUID: a JSON value of github.com/google/uuid.UUID may not decode as github.com/gofrs/uuid.UUID`},
		},
		{
			name:   "queue removed",
			before: "queues:\n  a: {}\n  b:\n    payload: {n: int}\n",
			after:  "queues:\n  a: {}\n",
			want:   []string{`3:1: queue "b" was removed, but jobs may still be queued in its table; declare it with dropped: true so that the next migration drops the table`},
		},
		{
			name:   "unique key added",
			before: "queues:\n  a:\n    payload: {u: int64}\n",
			after:  "queues:\n  a:\n    payload: {u: int64}\n    unique: {by: [u]}\n",
			want:   []string{`6:5: queue "a" now has a unique key: jobs already queued may hold duplicates of it, and the migration cannot build its unique index over them`},
		},
		{
			name:   "unique key changed",
			before: "queues:\n  a:\n    payload: {u: int64, w: string}\n    unique: {by: [u, w]}\n",
			after:  "queues:\n  a:\n    payload: {u: int64, w: string}\n    unique: {by: [u]}\n",
			want:   []string{`6:5: the unique key of queue "a" changed from (u, w) to (u): jobs already queued were deduplicated by the old key, and the migration cannot build the new unique index while they hold duplicates of the new one`},
		},
		{
			name:   "unique key to the whole payload",
			before: "queues:\n  a:\n    payload: {u: int64, w: string}\n    unique: {by: [u, w]}\n",
			after:  "queues:\n  a:\n    payload: {u: int64, w: string}\n    unique: {}\n",
			want:   []string{`6:5: the unique key of queue "a" changed from (u, w) to the whole payload: jobs already queued were deduplicated by the old key, and the migration cannot build the new unique index while they hold duplicates of the new one`},
		},
		{
			name:   "unique states widened",
			before: "queues:\n  a:\n    payload: {u: int64}\n    retention: {completed: 1h}\n    unique: {by: [u]}\n",
			after:  "queues:\n  a:\n    payload: {u: int64}\n    retention: {completed: 1h}\n    unique: {by: [u], states: [pending, running, completed, failed]}\n",
			want:   []string{`7:5: unique.states of queue "a" now also has completed and failed: the migration cannot build the wider unique index while such jobs hold duplicates`},
		},
		{
			name:   "whole-payload unique key and an optional field added",
			before: "queues:\n  a:\n    payload: {u: int64}\n    unique: {}\n",
			after:  "queues:\n  a:\n    payload: {u: int64, note: \"*string\"}\n    unique: {}\n",
			want:   []string{`6:5: the unique key of queue "a" is the whole payload, and the payload changed: jobs queued before this change would never count as duplicates of jobs queued after it`},
		},
		{
			name:   "whole-payload unique key and a shared struct changed",
			before: "types:\n  A: {x: int}\nqueues:\n  a:\n    payload: {a: A}\n    unique: {}\n",
			after:  "types:\n  A: {x: int, y: \"*int\"}\nqueues:\n  a:\n    payload: {a: A}\n    unique: {}\n",
			want:   []string{`8:5: the unique key of queue "a" is the whole payload, and the payload changed: jobs queued before this change would never count as duplicates of jobs queued after it`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := breakingOf(t, compatHead+tt.before, compatHead+tt.after)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("breaking changes:\n got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestLockRoundTrip renders a lock with every kind of line and expects
// parsing it back to render the same bytes, and only reachable shared
// structs to be recorded.
func TestLockRoundTrip(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("skipjack.yaml", []byte(compatHead+`types:
  Unused: {x: int}
  Address: {street: string, zip: {type: "*string", deprecated: true}}
  Order: {lines: "[]Line", parent: "*Order"}
  Line: {sku: string, raw: json.RawMessage}
queues:
  a:
    payload: {ship_to: Address, ids: "[]int64", at: {type: time.Time, deprecated: true}}
    unique: {by: [at]}
  b:
    payload: {order: "map[string]*Order", id: github.com/google/uuid.UUID}
    unique: {}
  gone:
    dropped: true
`))
	if err != nil {
		t.Fatal(err)
	}
	rendered := lockOf(cfg).render()
	want := lockHeader + "\n" + lockPreamble + `
queue a
	field ship_to Address
	field ids []int64
	field at time.Time deprecated
	unique by at states pending,running

queue b
	field order map[string]*Order
	field id github.com/google/uuid.UUID
	unique by * states pending,running

type Address
	field street string
	field zip *string deprecated

type Order
	field lines []Line
	field parent *Order

type Line
	field sku string
	field raw json.RawMessage
`
	if string(rendered) != want {
		t.Fatalf("rendered lock:\n%s\nwant:\n%s", rendered, want)
	}
	lock, err := parseLock(rendered)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if again := lock.render(); string(again) != string(rendered) {
		t.Errorf("render(parse(lock)) differs:\n%s", again)
	}
	crlf, err := parseLock(bytes.ReplaceAll(rendered, []byte("\n"), []byte("\r\n")))
	if err != nil {
		t.Fatalf("parse with CRLF line ends: %v", err)
	}
	if again := crlf.render(); string(again) != string(rendered) {
		t.Errorf("render(parse(lock with CRLF)) differs:\n%s", again)
	}
}

func TestParseLockErrors(t *testing.T) {
	t.Parallel()
	header := lockHeader + "\n"
	tests := []struct{ name, data, want string }{
		{"empty", "", "empty file"},
		{"no header", "queue a\n", `line 1: not a skipjack lock file (line 1 is not "# Code generated by skipjack. DO NOT EDIT.")`},
		{"field outside a block", header + "\tfield a string\n", `line 2: unreadable line "\tfield a string"`},
		{"unknown line", header + "queue a\n\tfield a string optional\n", `line 3: unreadable line "\tfield a string optional"`},
		{"unique in a type", header + "type A\n\tunique by a states pending\n", `line 3: unreadable line "\tunique by a states pending"`},
		{"bad type", header + "queue a\n\tfield a Strnig\n", `queue a: field a: unknown type "Strnig" (did you mean "string"?)`},
		{"type twice", header + "type A\ntype A\n", "type A is recorded twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseLock([]byte(tt.data))
			if err == nil || err.Error() != tt.want {
				t.Errorf("parseLock error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestLockOfGoldenInputs records the lock of every valid golden input and
// expects it to parse back to the same bytes and to find no breaking
// change between a config and its own lock.
func TestLockOfGoldenInputs(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("../../golden/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for _, input := range inputs {
		cfg, err := config.Load(input)
		if err != nil {
			continue // an error case
		}
		valid++
		rendered := lockOf(cfg).render()
		lock, err := parseLock(rendered)
		if err != nil {
			t.Errorf("%s: parse its lock: %v\n%s", input, err, rendered)
			continue
		}
		if again := lock.render(); !bytes.Equal(again, rendered) {
			t.Errorf("%s: the lock does not survive a round trip:\n%s\nbecame\n%s", input, rendered, again)
		}
		for _, ch := range breakingChanges(cfg, lock) {
			t.Errorf("%s:%d:%d: breaking change against its own lock: %s", input, ch.Pos.Line, ch.Pos.Col, ch.Msg)
		}
	}
	if valid < 5 {
		t.Errorf("only %d valid golden inputs found", valid)
	}
}

// FuzzParseLock feeds parseLock arbitrary files: a damaged lock must be an
// error, never a panic, and whatever parses must render and parse again to
// the same lock.
func FuzzParseLock(f *testing.F) {
	f.Add([]byte(lockHeader + "\nqueue a\n\tfield x map[string]*A deprecated\n\tunique by * states pending,running\ntype A\n\tfield y []int64\n"))
	f.Add([]byte(lockHeader + "\nqueue a\n\tfield r string default\n\tfield s string default deprecated\n"))
	f.Add([]byte(lockHeader + "\n\t\n"))
	f.Add([]byte(lockHeader + "\nqueue a\n\tunique by a,b states pending\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lock, err := parseLock(data)
		if err != nil {
			return
		}
		again, err := parseLock(lock.render())
		if err != nil {
			t.Fatalf("a parsed lock renders unreadably: %v\n%s", err, lock.render())
		}
		if !bytes.Equal(again.render(), lock.render()) {
			t.Fatalf("render is not stable:\n%s\n%s", lock.render(), again.render())
		}
	})
}
