package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseUniqueScheduleAndLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, q Queue)
	}{
		{
			name: "defaults: no unique, no schedule, no limit",
			yaml: head + "queues:\n  a:\n    payload: {x: int}\n",
			check: func(t *testing.T, q Queue) {
				if q.Unique != nil || q.Schedule != nil || q.MaxPayloadBytes != 0 || q.Payload[0].Deprecated {
					t.Errorf("got unique %+v, schedule %+v, max %d, deprecated %v", q.Unique, q.Schedule, q.MaxPayloadBytes, q.Payload[0].Deprecated)
				}
			},
		},
		{
			name: "unique by fields in written order with default states",
			yaml: head + "queues:\n  a:\n    payload: {user_id: int64, week: string, at: \"*time.Time\", every: time.Duration, ok: bool, n: uint16}\n    unique:\n      by: [week, user_id, at, every, ok, n]\n",
			check: func(t *testing.T, q Queue) {
				want := &Unique{By: []string{"week", "user_id", "at", "every", "ok", "n"}, States: []string{"pending", "running"}, Pos: Pos{6, 5}}
				if !reflect.DeepEqual(q.Unique, want) {
					t.Errorf("Unique = %+v, want %+v", q.Unique, want)
				}
			},
		},
		{
			name: "unique over the whole payload, states in canonical order",
			yaml: head + "queues:\n  a:\n    payload: {x: int}\n    retention: {completed: 1h}\n    unique: {states: [failed, completed, running, pending]}\n",
			check: func(t *testing.T, q Queue) {
				want := &Unique{States: []string{"pending", "running", "completed", "failed"}, Pos: Pos{7, 5}}
				if !reflect.DeepEqual(q.Unique, want) {
					t.Errorf("Unique = %+v, want %+v", q.Unique, want)
				}
			},
		},
		{
			name: "max_payload_bytes",
			yaml: head + "queues:\n  a:\n    max_payload_bytes: 65536\n",
			check: func(t *testing.T, q Queue) {
				if q.MaxPayloadBytes != 65536 {
					t.Errorf("MaxPayloadBytes = %d, want 65536", q.MaxPayloadBytes)
				}
			},
		},
		{
			name: "deprecated long form next to the short form",
			yaml: head + "queues:\n  a:\n    payload:\n      to: string\n      cc: {type: \"[]string\", deprecated: true}\n      bcc: {type: string}\n",
			check: func(t *testing.T, q Queue) {
				var got []string
				for _, f := range q.Payload {
					got = append(got, f.Key+" "+f.Type.String()+" "+map[bool]string{true: "deprecated", false: "live"}[f.Deprecated]+" "+posString(f.Pos))
				}
				want := []string{"to string live 6:11", "cc []string deprecated 7:18", "bcc string live 8:19"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("fields:\n got %q\nwant %q", got, want)
				}
			},
		},
		{
			name: "schedule forms and defaults",
			yaml: head + `queues:
  a:
    schedule:
      - cron: "0 6 * * 1"
        timezone: Europe/Berlin
        missed: once
      - cron: "@every 1h30m"
      - cron: "@weekly"
      - {cron: "*/15 9-17 * * mon-fri"}
`,
			check: func(t *testing.T, q Queue) {
				want := []Schedule{
					{Cron: "0 6 * * 1", Timezone: "Europe/Berlin", PayloadJSON: "{}", Missed: "once", Pos: Pos{6, 9}},
					{Cron: "@every 1h30m", Every: 90 * time.Minute, Timezone: "UTC", PayloadJSON: "{}", Missed: "skip", Pos: Pos{9, 9}},
					{Cron: "@weekly", Timezone: "UTC", PayloadJSON: "{}", Missed: "skip", Pos: Pos{10, 9}},
					{Cron: "*/15 9-17 * * mon-fri", Timezone: "UTC", PayloadJSON: "{}", Missed: "skip", Pos: Pos{11, 9}},
				}
				if !reflect.DeepEqual(q.Schedule, want) {
					t.Errorf("Schedule:\n got %+v\nwant %+v", q.Schedule, want)
				}
			},
		},
		{
			name: "schedule payload keys follow the field order, only the keys written",
			yaml: head + "queues:\n  a:\n    payload: {a: int, b: string, c: bool}\n    schedule:\n      - cron: \"@daily\"\n        payload: {c: true, a: -7}\n",
			check: func(t *testing.T, q Queue) {
				if got, want := q.Schedule[0].PayloadJSON, `{"a":-7,"c":true}`; got != want {
					t.Errorf("PayloadJSON = %s, want %s", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("skipjack.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			tt.check(t, cfg.Queues[0])
		})
	}
}

func posString(p Pos) string {
	return strings.Join([]string{itoa(p.Line), itoa(p.Col)}, ":")
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestSchedulePayloadMatchesEncodingJSON writes a value for every kind of
// field in a schedule payload and expects PayloadJSON to be exactly what
// encoding/json makes of the same Go value, which is what the generated
// Payload type decodes.
func TestSchedulePayloadMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	const yaml = head + `types:
  Address:
    street: string
    zip: "*string"
queues:
  a:
    payload:
      user_id: int64
      week: string
      at: time.Time
      every: time.Duration
      ratio: float32
      share: float64
      tags: "[]string"
      meta: "map[string]int"
      ship_to: Address
      bill_to: "*Address"
      maybe: "*int32"
      raw: json.RawMessage
      data: "[]byte"
      small: uint8
      big: uint64
      flag: bool
      none: "[]int"
    schedule:
      - cron: "0 6 * * 1"
        payload:
          user_id: 0x10
          week: 2024-01-01
          at: 2024-01-02T15:04:05.5+01:00
          every: 1h30m
          ratio: 0.1
          share: 1e-7
          tags: [a, "<b>&"]
          meta: {z: 1, a: 2}
          ship_to: {zip: null, street: "Main St."}
          bill_to: {street: x, zip: "12345"}
          maybe: null
          raw: {b: [1, 2.5, "x", null, true], a: {}}
          data: aGVsbG8=
          small: 255
          big: 18446744073709551615
          flag: false
          none: null
`
	cfg, err := Parse("skipjack.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	type address struct {
		Street string  `json:"street"`
		Zip    *string `json:"zip"`
	}
	zip := "12345"
	payload := struct {
		UserID int64           `json:"user_id"`
		Week   string          `json:"week"`
		At     time.Time       `json:"at"`
		Every  time.Duration   `json:"every"`
		Ratio  float32         `json:"ratio"`
		Share  float64         `json:"share"`
		Tags   []string        `json:"tags"`
		Meta   map[string]int  `json:"meta"`
		ShipTo address         `json:"ship_to"`
		BillTo *address        `json:"bill_to"`
		Maybe  *int32          `json:"maybe"`
		Raw    json.RawMessage `json:"raw"`
		Data   []byte          `json:"data"`
		Small  uint8           `json:"small"`
		Big    uint64          `json:"big"`
		Flag   bool            `json:"flag"`
		None   []int           `json:"none"`
	}{
		UserID: 16,
		Week:   "2024-01-01",
		At:     time.Date(2024, 1, 2, 15, 4, 5, 5e8, time.FixedZone("", 3600)),
		Every:  90 * time.Minute,
		Ratio:  0.1,
		Share:  1e-7,
		Tags:   []string{"a", "<b>&"},
		Meta:   map[string]int{"z": 1, "a": 2},
		ShipTo: address{Street: "Main St."},
		BillTo: &address{Street: "x", Zip: &zip},
		Raw:    json.RawMessage(`{"b":[1,2.5,"x",null,true],"a":{}}`),
		Data:   []byte("hello"),
		Small:  255,
		Big:    18446744073709551615,
	}
	want, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Queues[0].Schedule[0].PayloadJSON; got != string(want) {
		t.Errorf("PayloadJSON:\n got %s\nwant %s", got, want)
	}
}

func TestParseUniqueScheduleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string // every error, one per line
	}{
		{
			name: "unique.by fields",
			yaml: head + `types:
  Address: {street: string}
queues:
  a:
    payload:
      user_id: int64
      week: string
      ratio: float64
      tags: "[]string"
      addr: Address
      when: "*time.Time"
      owner: github.com/google/uuid.UUID
      raw: json.RawMessage
      data: "[]byte"
      bad: strnig
    unique:
      by: [user_di, week, week, ratio, tags, addr, when, owner, raw, data, bad, 3]
`,
			want: `skipjack.yaml:17:12: unknown type "strnig" (did you mean "string"?)
skipjack.yaml:19:12: unknown field "user_di" in unique.by: the payload has no such field (did you mean "user_id"?)
skipjack.yaml:19:27: duplicate field "week" in unique.by (first on line 19)
skipjack.yaml:19:33: field "ratio" (float64) cannot be part of a unique key: floating-point values that print alike may differ; use an integer or a string
skipjack.yaml:19:40: field "tags" ([]string) cannot be part of a unique key: lists and maps are not keys; list scalar fields instead
skipjack.yaml:19:46: field "addr" (Address) cannot be part of a unique key: structs are not keys; list scalar fields instead
skipjack.yaml:19:58: field "owner" (github.com/google/uuid.UUID) cannot be part of a unique key: skipjack does not know how its type is spelled in JSON
skipjack.yaml:19:65: field "raw" (json.RawMessage) cannot be part of a unique key: only bool, string, integer, time.Time and time.Duration fields (or pointers to them) are keys
skipjack.yaml:19:70: field "data" ([]byte) cannot be part of a unique key: only bool, string, integer, time.Time and time.Duration fields (or pointers to them) are keys
skipjack.yaml:19:81: by must list strings, not a number`,
		},
		{
			name: "unique.states",
			yaml: head + `queues:
  a:
    unique:
      states: [pending, runing, completed, failed, pending]
    retention: {failed: 0s}
  b:
    unique: {states: [pending]}
  c:
    unique: {states: []}
  d:
    unique: {states: pending}
`,
			want: `skipjack.yaml:6:25: unknown state "runing" in unique.states: use pending, running, completed, failed (did you mean "running"?)
skipjack.yaml:6:33: unique.states has completed, but this queue deletes completed jobs at once (retention.completed is 0s); set retention.completed to keep them
skipjack.yaml:6:44: unique.states has failed, but this queue deletes failed jobs at once (retention.failed is 0s); set retention.failed to keep them
skipjack.yaml:6:52: duplicate state "pending" in unique.states (first on line 6)
skipjack.yaml:9:22: unique.states must include pending and running: every claim and retry moves a job between them, and a move into the unique index could fail
skipjack.yaml:11:22: unique.states lists no states; leave it out for pending and running
skipjack.yaml:13:22: states must be a list such as [pending, running], not the string "pending"`,
		},
		{
			name: "unique forms",
			yaml: head + "queues:\n  a:\n    unique:\n  b:\n    unique: {by: []}\n  c:\n    unique: {key: [x]}\n  d:\n    unique: true\n",
			want: `skipjack.yaml:5:5: unique must be a mapping such as {by: [user_id]}; write "unique: {}" to make the whole payload the key
skipjack.yaml:7:18: unique.by lists no fields; leave by out to make the whole payload the key
skipjack.yaml:9:14: unknown key "key" in unique
skipjack.yaml:11:13: unique must be a mapping, not a boolean`,
		},
		{
			name: "max_payload_bytes",
			yaml: head + "queues:\n  a:\n    max_payload_bytes: 0\n  b:\n    max_payload_bytes: lots\n  c:\n    max_payload_bytes: -5\n",
			want: `skipjack.yaml:5:24: max_payload_bytes must be greater than 0 (leave it out for no limit)
skipjack.yaml:7:24: max_payload_bytes must be an integer, not the string "lots"
skipjack.yaml:9:24: max_payload_bytes must be greater than 0 (leave it out for no limit)`,
		},
		{
			name: "deprecated long form",
			yaml: head + "queues:\n  a:\n    payload:\n      a: {type: strin, deprecated: maybe}\n      b: {deprecated: true}\n      c: {type: string, colour: red}\n      d: {type: [string]}\n",
			want: `skipjack.yaml:6:17: unknown type "strin" (did you mean "string"?)
skipjack.yaml:6:36: deprecated must be true or false, not the string "maybe"
skipjack.yaml:7:10: field "b": missing required key "type"
skipjack.yaml:8:25: unknown key "colour" in field "c"
skipjack.yaml:9:17: type of field "d" must be a string such as "[]string", not a list (quote types that start with [ or *)`,
		},
		{
			name: "cron expressions",
			yaml: head + `queues:
  a:
    schedule:
      - cron: "0 6 * *"
      - cron: "@dayly"
      - cron: "@every 500ms"
      - cron: "@every soon"
      - cron: "61 * * * *"
      - cron: "0 0 30 2 *"
      - cron: "TZ=UTC"
      - cron: "CRON_TZ=Europe/Berlin 0 6 * * *"
      - cron: "0 0 0 6 * * 1"
      - cron: ""
      - cron: 5
`,
			want: `skipjack.yaml:6:15: invalid cron "0 6 * *": expected exactly 5 fields, found 4: [0 6 * *]
skipjack.yaml:7:15: invalid cron "@dayly": unrecognized descriptor: @dayly (did you mean "@daily"?)
skipjack.yaml:8:15: invalid cron "@every 500ms": the interval must be at least 1s
skipjack.yaml:9:15: invalid cron "@every soon": @every takes a Go duration such as 30s, 15m or 1h30m
skipjack.yaml:10:15: invalid cron "61 * * * *": end of range (61) above maximum (59): 61
skipjack.yaml:11:15: invalid cron "0 0 30 2 *": it never fires
skipjack.yaml:12:15: invalid cron "TZ=UTC": set the time zone with the timezone key, not in the expression
skipjack.yaml:13:15: invalid cron "CRON_TZ=Europe/Berlin 0 6 * * *": set the time zone with the timezone key, not in the expression
skipjack.yaml:14:15: invalid cron "0 0 0 6 * * 1": expected exactly 5 fields, found 7: [0 0 0 6 * * 1]
skipjack.yaml:15:15: invalid cron "": empty spec string
skipjack.yaml:16:15: invalid cron "5": expected exactly 5 fields, found 1: [5]`,
		},
		{
			name: "schedule entries",
			yaml: head + `queues:
  a:
    schedule:
      - cron: "@every 1h"
        timezone: Europe/Berlin
      - cron: "@daily"
        timezone: Mars/Olympus
      - timezone: Local
        missed: never
      - "@hourly"
      - cron: "@daily"
        payload: [1]
      - cron: "@daily"
        at: 6am
  b:
    schedule: {cron: "@hourly"}
  c:
    payload: {x: int}
    schedule:
      - cron: "@daily"
        payload: {x: 1}
      - cron: "@daily"
        payload: {x: 1}
      - cron: "@daily"
        payload: {x: 2}
`,
			want: `skipjack.yaml:7:19: timezone has no effect on an @every schedule (its slots are multiples of the interval since the Unix epoch); remove it
skipjack.yaml:9:19: unknown timezone "Mars/Olympus": use an IANA name such as UTC, Europe/Berlin or America/New_York
skipjack.yaml:10:9: schedule entry: missing required key "cron"
skipjack.yaml:10:19: timezone Local depends on the machine a worker runs on; name the zone, such as Europe/Berlin
skipjack.yaml:11:17: missed must be skip or once, not "never"
skipjack.yaml:12:9: schedule entry must be a mapping, not the string "@hourly"
skipjack.yaml:14:18: schedule payload must be a mapping, not a list
skipjack.yaml:16:9: unknown key "at" in schedule entry
skipjack.yaml:18:15: schedule must be a list of entries such as "- cron: '0 6 * * 1'", not a mapping
skipjack.yaml:24:9: duplicate schedule: the same cron, timezone and payload as line 22`,
		},
		{
			name: "schedule payload values",
			yaml: head + `types:
  Address: {street: string}
queues:
  a:
    payload: {n: int8, u: uint16, s: string, d: time.Duration, t: time.Time, b: bool, x: "*int", f: float32, l: "[]int", m: "map[string]bool", a: Address, o: net/netip.Addr, y: "[]byte"}
    schedule:
      - cron: "@hourly"
        payload: {n: 300, u: -1, s: 5, d: 5, t: yesterday, b: "true", x: null, nope: 1}
      - cron: "@hourly"
        payload: {n: 1.5, s: "a\0b", d: 1x, t: 2024-01-02, f: .inf, l: [1, x], m: {k: 1}, a: {stret: x}, o: "::1", y: "%%%"}
      - cron: "@hourly"
        payload: {n: null, l: 5, a: [1], u: 70000}
`,
			want: `skipjack.yaml:10:22: schedule payload: n (int8) is out of range: 300
skipjack.yaml:10:30: schedule payload: u (uint16) must not be negative
skipjack.yaml:10:37: schedule payload: s (string) must be a string (quote it: "5"), not a number
skipjack.yaml:10:43: schedule payload: d (time.Duration) must be a Go duration such as 90s or 1h30m (stored as nanoseconds), not a number
skipjack.yaml:10:49: schedule payload: t (time.Time) must be an RFC 3339 time such as 2024-01-02T15:04:05Z, not the string "yesterday"
skipjack.yaml:10:63: schedule payload: b (bool) must be true or false, not the string "true"
skipjack.yaml:10:80: unknown field "nope" in schedule payload
skipjack.yaml:12:22: schedule payload: n (int8) must be an integer, not a number
skipjack.yaml:12:30: schedule payload: s contains a NUL character, which jsonb cannot store
skipjack.yaml:12:41: schedule payload: d (time.Duration) must be a Go duration such as 90s or 1h30m (stored as nanoseconds), not the string "1x"
skipjack.yaml:12:48: schedule payload: t (time.Time) must be an RFC 3339 time such as 2024-01-02T15:04:05Z, not the string "2024-01-02"
skipjack.yaml:12:63: schedule payload: f (float32) must be a finite number, not a number
skipjack.yaml:12:76: schedule payload: l[1] (int) must be an integer, not the string "x"
skipjack.yaml:12:87: schedule payload: m.k (bool) must be true or false, not a number
skipjack.yaml:12:95: unknown field "a.stret" in schedule payload (did you mean "street"?)
skipjack.yaml:12:109: schedule payload: o has the external type net/netip.Addr, whose JSON form skipjack cannot check; leave it out (it decodes to its zero value)
skipjack.yaml:12:119: schedule payload: y ([]byte) must be a base64 string, not the string "%%%"
skipjack.yaml:14:22: schedule payload: n (int8) cannot be null; leave it out for its zero value
skipjack.yaml:14:31: schedule payload: l ([]int) must be a list, not a number
skipjack.yaml:14:37: schedule payload: a (Address) must be a mapping of its fields, not a list
skipjack.yaml:14:45: schedule payload: u (uint16) is out of range: 70000`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("skipjack.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want errors:\n%s", cfg, tt.want)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error is not Errors: %v", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("errors:\n got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
