package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// contractExample is the example from DESIGN.md's "The YAML (contract)",
// verbatim.
const contractExample = `version: 1
name: shop                      # config id: keys migration tracking (default: the schema)
out: ./internal/jobs            # root folder of generated Go packages, relative to this file
migrations:
  dir: ./migrations             # where migration files go, relative to this file
  format: plain                 # plain (NNNN_name.up.sql/.down.sql); also goose, golang-migrate, tern
schema: skipjack                # Postgres schema of the queue tables (default skipjack)
types:                          # reusable payload structs, usable by name in any payload
  Address:
    street: string
    zip: "*string"
queues:
  send_email:                   # ^[a-z][a-z0-9_]{0,39}$ ; table skipjack.send_email
    payload:                    # field name -> Go type expression; order is kept
      to: string
      cc: "[]string"
      send_at: "*time.Time"
      ship_to: Address
      meta: "map[string]string"
    max_attempts: 5             # default 25; also the column default for SQL producers
    backoff: {min: 1s, max: 1h} # exponential with jitter between min and max (these defaults)
    timeout: 1m                 # handler deadline per attempt (default 1m)
    lease: 30s                  # how long a claim lasts without a heartbeat (default 30s)
    priority: true              # enables per-job priority, smallint 0..9, lower runs first (default false)
    notify: true                # NOTIFY workers on insert (default true; false = poll only)
    retention:
      completed: 0s             # 0 = delete at ack (default); > 0 = keep, prune in bounded batches
      failed: 720h              # keep failed jobs (default 720h)
    table:                      # storage parameters of this queue's table
      fillfactor: 90
      autovacuum_vacuum_scale_factor: 0.01
    dropped: false              # true: the next migration drops this queue (schema-evolution issue)
  resize_image:
    payload:
      image_id: int64
      owner: "github.com/google/uuid.UUID"   # external Go types: import path + "." + name
`

// Shorthands for expected type expressions.
func builtin(name string) *TypeExpr { return &TypeExpr{Kind: KindBuiltin, Name: name} }
func ptr(elem *TypeExpr) *TypeExpr  { return &TypeExpr{Kind: KindPointer, Elem: elem} }

func TestLoadContractExample(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "skipjack.yaml")
	if err := os.WriteFile(path, []byte(contractExample), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Path:       path,
		Dir:        dir,
		Version:    1,
		Name:       "shop",
		Out:        "./internal/jobs",
		OutPos:     Pos{3, 6},
		SchemaPos:  Pos{7, 9},
		Migrations: Migrations{Dir: "./migrations", Format: "plain"},
		Schema:     "skipjack",
		Types: []Struct{{
			Name: "Address",
			Fields: []Field{
				{Key: "street", GoName: "Street", Type: builtin("string"), Pos: Pos{10, 13}},
				{Key: "zip", GoName: "Zip", Type: ptr(builtin("string")), Pos: Pos{11, 10}},
			},
			Pos: Pos{9, 3},
		}},
		Queues: []Queue{
			{
				Name:    "send_email",
				Package: "sendemail",
				Payload: []Field{
					{Key: "to", GoName: "To", Type: builtin("string"), Pos: Pos{15, 11}},
					{Key: "cc", GoName: "Cc", Type: &TypeExpr{Kind: KindSlice, Elem: builtin("string")}, Pos: Pos{16, 11}},
					{Key: "send_at", GoName: "SendAt", Type: ptr(builtin("time.Time")), Pos: Pos{17, 16}},
					{Key: "ship_to", GoName: "ShipTo", Type: &TypeExpr{Kind: KindShared, Name: "Address"}, Pos: Pos{18, 16}},
					{Key: "meta", GoName: "Meta", Type: &TypeExpr{Kind: KindMap, Elem: builtin("string")}, Pos: Pos{19, 13}},
				},
				MaxAttempts:     5,
				BackoffMin:      time.Second,
				BackoffMax:      time.Hour,
				Timeout:         time.Minute,
				Lease:           30 * time.Second,
				Priority:        true,
				Notify:          true,
				RetainCompleted: 0,
				RetainFailed:    720 * time.Hour,
				Table: []StorageParam{
					{Name: "fillfactor", Value: "90", Pos: Pos{30, 7}},
					{Name: "autovacuum_vacuum_scale_factor", Value: "0.01", Pos: Pos{31, 7}},
				},
				Pos: Pos{13, 3},
			},
			{
				Name:    "resize_image",
				Package: "resizeimage",
				Payload: []Field{
					{Key: "image_id", GoName: "ImageID", Type: builtin("int64"), Pos: Pos{35, 17}},
					{Key: "owner", GoName: "Owner", Type: &TypeExpr{Kind: KindExternal, Name: "UUID", ImportPath: "github.com/google/uuid"}, Pos: Pos{36, 14}},
				},
				MaxAttempts:  25,
				BackoffMin:   time.Second,
				BackoffMax:   time.Hour,
				Timeout:      time.Minute,
				Lease:        30 * time.Second,
				Notify:       true,
				RetainFailed: 720 * time.Hour,
				Pos:          Pos{33, 3},
			},
		},
		QueuesPos: Pos{12, 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(contract example):\n got %+v\nwant %+v", got, want)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse("skipjack.yaml", []byte("version: 1\nout: jobs\nqueues:\n  ping:\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.Name != "skipjack" || cfg.Schema != "skipjack" || cfg.Migrations != (Migrations{Dir: "./migrations", Format: "plain"}) {
		t.Errorf("defaults: name %q, schema %q, migrations %+v", cfg.Name, cfg.Schema, cfg.Migrations)
	}
	q := cfg.Queues[0]
	want := Queue{
		Name: "ping", Package: "ping", MaxAttempts: 25,
		BackoffMin: time.Second, BackoffMax: time.Hour, Timeout: time.Minute, Lease: 30 * time.Second,
		Notify: true, RetainFailed: 720 * time.Hour, Pos: Pos{4, 3},
	}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("queue defaults:\n got %+v\nwant %+v", q, want)
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, cfg *Config)
	}{
		{
			name: "field defaults, encoded as encoding/json encodes them",
			yaml: `version: 1
out: jobs
queues:
  send_email:
    payload:
      reply_to: {type: string, default: "noreply@example.com"}
      day: {type: string, default: 2024-01-02}
      tries: {type: int16, default: 0x10}
      copies: {type: uint, default: 3}
      urgent: {type: bool, default: true}
      ratio: {type: float32, default: 0.1}
      whole: {type: float64, default: 2}
      wait: {type: time.Duration, default: 1m30s}
      none: string
`,
			check: func(t *testing.T, cfg *Config) {
				var got []string
				for _, f := range cfg.Queues[0].Payload {
					got = append(got, f.Key+"="+f.Default)
				}
				want := []string{`reply_to="noreply@example.com"`, `day="2024-01-02"`, "tries=16", "copies=3", "urgent=true", "ratio=0.1", "whole=2", "wait=90000000000", "none="}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("defaults:\n got %q\nwant %q", got, want)
				}
			},
		},
		{
			name: "name defaults to schema",
			yaml: "version: 1\nout: jobs\nschema: work_q\nqueues: {a: {}}\n",
			check: func(t *testing.T, cfg *Config) {
				if cfg.Name != "work_q" {
					t.Errorf("Name = %q, want work_q", cfg.Name)
				}
			},
		},
		{
			name: "nested types and forward references",
			yaml: `version: 1
out: jobs
types:
  Order:
    lines: "[]Line"
    by_sku: "map[string]*Line"
    parent: "*Order"
  Line:
    sku: string
    raw: json.RawMessage
    data: "[]byte"
    every: time.Duration
queues:
  ship:
    payload:
      order: Order
      ip: net/netip.Addr
      legacy_ip: net.IP
      ids: "[]int64"
`,
			check: func(t *testing.T, cfg *Config) {
				var got []string
				for _, s := range cfg.Types {
					for _, f := range s.Fields {
						got = append(got, f.GoName+" "+f.Type.String())
					}
				}
				for _, f := range cfg.Queues[0].Payload {
					got = append(got, f.GoName+" "+f.Type.String())
				}
				want := []string{
					"Lines []Line", "BySku map[string]*Line", "Parent *Order",
					"Sku string", "Raw json.RawMessage", "Data []byte", "Every time.Duration",
					"Order Order", "IP net/netip.Addr", "LegacyIP net.IP", "IDs []int64",
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("fields:\n got %q\nwant %q", got, want)
				}
			},
		},
		{
			name: "queue settings",
			yaml: `version: 1
out: jobs
migrations: {format: golang-migrate}
queues:
  a:
    payload: {}
    backoff: {min: 500ms}
    lease: 1s
    notify: false
    retention: {completed: 24h, failed: 0s}
    table: {autovacuum_enabled: false, vacuum_index_cleanup: "off", autovacuum_vacuum_cost_delay: 2, autovacuum_analyze_scale_factor: 1e-5}
`,
			check: func(t *testing.T, cfg *Config) {
				q := cfg.Queues[0]
				if cfg.Migrations.Format != "golang-migrate" || q.BackoffMin != 500*time.Millisecond || q.BackoffMax != time.Hour ||
					q.Lease != time.Second || q.Notify || q.RetainCompleted != 24*time.Hour || q.RetainFailed != 0 || len(q.Payload) != 0 {
					t.Errorf("got %+v", q)
				}
				var params []string
				for _, p := range q.Table {
					params = append(params, p.Name+"="+p.Value)
				}
				want := []string{"autovacuum_enabled=false", "vacuum_index_cleanup='off'", "autovacuum_vacuum_cost_delay=2", "autovacuum_analyze_scale_factor=0.00001"}
				if !reflect.DeepEqual(params, want) {
					t.Errorf("table:\n got %q\nwant %q", params, want)
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
			tt.check(t, cfg)
		})
	}
}

// head is the start of a valid config that error cases extend.
const head = "version: 1\nout: ./jobs\n"

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string // every error, one per line
	}{
		{
			name: "yaml syntax",
			yaml: head + "queues:\n  a: {payload: {x: [}\n",
			want: "skipjack.yaml:3:1: invalid YAML: did not find expected node content",
		},
		{
			name: "tab indentation",
			yaml: head + "queues:\n  a:\n\tpayload: {}\n",
			want: "skipjack.yaml:5:1: invalid YAML: found character that cannot start any token",
		},
		{
			name: "empty file",
			yaml: "",
			want: "skipjack.yaml:1:1: empty config",
		},
		{
			name: "two documents",
			yaml: head + "queues: {a: {}}\n---\nversion: 1\n",
			want: "skipjack.yaml:4:1: more than one YAML document (the config is a single document)",
		},
		{
			name: "root not a mapping",
			yaml: "- version: 1\n",
			want: "skipjack.yaml:1:1: the config must be a mapping, not a list",
		},
		{
			name: "missing required keys",
			yaml: "schema: jobs\n",
			want: `skipjack.yaml:1:1: missing required key "version" (add "version: 1")
skipjack.yaml:1:1: missing required key "out" (the folder of the generated Go packages)
skipjack.yaml:1:1: missing required key "queues" (declare at least one queue)`,
		},
		{
			name: "wrong version",
			yaml: "version: 2\nout: jobs\nqueues: {a: {}}\n",
			want: "skipjack.yaml:1:10: unsupported version 2 (this skipjack reads version 1)",
		},
		{
			name: "no queues",
			yaml: head + "queues: {}\n",
			want: "skipjack.yaml:3:1: queues must declare at least one queue",
		},
		{
			name: "queues not a mapping",
			yaml: head + "queues:\n  - send_email\n",
			want: "skipjack.yaml:4:3: queues must be a mapping, not a list",
		},
		{
			name: "unknown type with did-you-mean",
			yaml: head + "queues:\n  a:\n    payload:\n      to: strnig\n",
			want: `skipjack.yaml:6:11: unknown type "strnig" (did you mean "string"?)`,
		},
		{
			name: "channel type",
			yaml: head + "queues:\n  a:\n    payload:\n      c: chan int\n      d: \"[]<-chan  string\"\n      e: \"*func() error\"\n      f: \"struct{ a int }\"\n      channel: string\n",
			want: `skipjack.yaml:6:10: unsupported type "chan int": channels do not survive a JSON round trip
skipjack.yaml:7:10: unsupported type "[]<-chan string": channels do not survive a JSON round trip
skipjack.yaml:8:10: unsupported type "*func() error": functions do not survive a JSON round trip
skipjack.yaml:9:10: unsupported type "struct{ a int }": declare the struct under types: and use its name`,
		},
		{
			name: "unknown shared type with did-you-mean",
			yaml: head + "types:\n  Address: {street: string}\nqueues:\n  a:\n    payload:\n      ship_to: \"[]*Adress\"\n",
			want: `skipjack.yaml:8:16: unknown type "Adress" (did you mean "Address"?)`,
		},
		{
			name: "undeclared type",
			yaml: head + "queues:\n  a:\n    payload:\n      ship_to: Address\n",
			want: `skipjack.yaml:6:16: unknown type "Address"`,
		},
		{
			name: "type expression errors",
			yaml: head + `queues:
  a:
    payload:
      m: "map[int]string"
      u: github.com/google/uuid.uuid
      k: any
      arr: "[3]int"
      pp: "**int"
      t: time.Tme
      n: json.Number
      cc: []
`,
			want: `skipjack.yaml:6:10: map keys must be string, not "int"
skipjack.yaml:7:10: invalid type "github.com/google/uuid.uuid": "uuid" is not an exported Go type name
skipjack.yaml:8:10: unsupported type "any": payload fields need a concrete type
skipjack.yaml:9:12: arrays are not supported ("[3]int"); use a slice
skipjack.yaml:10:11: pointer to pointer in "**int": one * makes a field optional
skipjack.yaml:11:10: unknown type "time.Tme" (did you mean "time.Time"?)
skipjack.yaml:12:10: unknown type "json.Number" (did you mean "encoding/json.Number"?)
skipjack.yaml:13:11: type of field "cc" must be a string such as "[]string", not a list (quote types that start with [ or *)`,
		},
		{
			name: "bad queue name",
			yaml: head + "queues:\n  SendEmail: {}\n  9lives: {}\n  a_very_long_queue_name_that_goes_past_forty: {}\n",
			want: `skipjack.yaml:4:3: invalid queue name "SendEmail": use lowercase letters, digits and underscores, starting with a letter, at most 40 bytes
skipjack.yaml:5:3: invalid queue name "9lives": use lowercase letters, digits and underscores, starting with a letter, at most 40 bytes
skipjack.yaml:6:3: invalid queue name "a_very_long_queue_name_that_goes_past_forty": use lowercase letters, digits and underscores, starting with a letter, at most 40 bytes`,
		},
		{
			name: "reserved queue names",
			yaml: head + "queues:\n  select: {}\n  go_to: {}\n  error: {}\n  len: {}\n  main: {}\n  test_data: {}\n  time: {}\n",
			want: `skipjack.yaml:4:3: queue name "select" is a Go keyword
skipjack.yaml:5:3: queue "go_to": package name "goto" is a Go keyword
skipjack.yaml:6:3: queue name "error" is a predeclared Go identifier
skipjack.yaml:7:3: queue name "len" is a predeclared Go identifier
skipjack.yaml:8:3: queue name "main" is reserved
skipjack.yaml:9:3: queue "test_data": package name "testdata" is reserved
skipjack.yaml:10:3: queue name "time" is reserved`,
		},
		{
			name: "package collision",
			yaml: head + "queues:\n  send_email: {}\n  sendemail: {}\n",
			want: `skipjack.yaml:5:3: queue "sendemail" and queue "send_email" (line 4) both become package sendemail`,
		},
		{
			name: "duplicate field key",
			yaml: head + "queues:\n  a:\n    payload:\n      to: string\n      to: int\n",
			want: `skipjack.yaml:7:7: duplicate field "to" (first on line 6)`,
		},
		{
			name: "duplicate queue key",
			yaml: head + "queues:\n  a: {}\n  b: {}\n  a: {}\n",
			want: `skipjack.yaml:6:3: duplicate queue "a" (first on line 4)`,
		},
		{
			name: "duplicate top-level key",
			yaml: head + "queues: {a: {}}\nout: ./other\n",
			want: `skipjack.yaml:4:1: duplicate key "out" (first on line 2)`,
		},
		{
			name: "unknown keys with did-you-mean",
			yaml: head + "queues:\n  a:\n    max_attempt: 3\n    backoff: {mn: 1s}\n    colour: red\nmigration: {}\n",
			want: `skipjack.yaml:5:5: unknown key "max_attempt" in queue "a" (did you mean "max_attempts"?)
skipjack.yaml:6:15: unknown key "mn" in backoff (did you mean "min"?)
skipjack.yaml:7:5: unknown key "colour" in queue "a"
skipjack.yaml:8:1: unknown key "migration" in the config (did you mean "migrations"?)`,
		},
		{
			name: "GoName collision",
			yaml: head + "queues:\n  a:\n    payload:\n      address_2: string\n      address2: string\n",
			want: `skipjack.yaml:7:7: field "address2" and field "address_2" (line 6) both become Go field Address2`,
		},
		{
			name: "bad field key",
			yaml: head + "queues:\n  a:\n    payload:\n      sendAt: string\n",
			want: `skipjack.yaml:6:7: invalid field name "sendAt": use snake_case (lowercase letters, digits and underscores, starting with a letter)`,
		},
		{
			name: "bad durations",
			yaml: head + "queues:\n  a:\n    timeout: 5 minutes\n    lease: 0s\n    backoff: {min: 2h}\n    retention: {failed: -1h}\n",
			want: `skipjack.yaml:5:14: timeout: invalid duration "5 minutes" (use Go syntax such as 500ms, 90s, 5m or 1h30m)
skipjack.yaml:6:12: lease must be greater than 0
skipjack.yaml:7:20: backoff min (2h0m0s) must not exceed max (1h0m0s)
skipjack.yaml:8:25: failed must not be negative`,
		},
		{
			name: "short lease",
			yaml: head + "queues:\n  a:\n    lease: 500ms\n",
			want: `skipjack.yaml:5:12: lease must be at least 1s (workers renew it every lease/3)`,
		},
		{
			name: "wrong scalar types",
			yaml: head + "queues:\n  a:\n    max_attempts: many\n    priority: yes\n    notify: {}\n  b:\n    max_attempts: 0\n",
			want: `skipjack.yaml:5:19: max_attempts must be an integer, not the string "many"
skipjack.yaml:6:15: priority must be true or false, not the string "yes"
skipjack.yaml:7:13: notify must be true or false, not a mapping
skipjack.yaml:9:19: max_attempts must be at least 1`,
		},
		{
			name: "storage parameters",
			yaml: head + "queues:\n  a:\n    table:\n      filfactor: 50\n      fillfactor: 5\n      autovacuum_enabled: 1\n      parallel_workers: 1.5\n      vacuum_index_cleanup: sometimes\n",
			want: `skipjack.yaml:6:7: unknown storage parameter "filfactor" (did you mean "fillfactor"?)
skipjack.yaml:7:19: fillfactor must be between 10 and 100
skipjack.yaml:8:27: autovacuum_enabled must be true or false, not a number
skipjack.yaml:9:25: parallel_workers must be an integer, not a number
skipjack.yaml:10:29: vacuum_index_cleanup must be one of auto, on, off, not "sometimes"`,
		},
		{
			name: "top-level values",
			yaml: "version: 1\nout: C:\\jobs\nschema: Jobs\nname: \"my shop\"\nmigrations: {dir: /var/migrations, format: gose}\nqueues: {a: {}}\n",
			want: `skipjack.yaml:2:6: out "C:\\jobs": use forward slashes
skipjack.yaml:3:9: invalid schema "Jobs": use lowercase letters, digits and underscores, not starting with a digit, at most 63 bytes
skipjack.yaml:4:7: invalid name "my shop": use letters, digits, '_', '.' and '-', at most 63 bytes
skipjack.yaml:5:19: migrations.dir "/var/migrations" must be relative to the config file
skipjack.yaml:5:44: unknown migrations format "gose": use plain, goose, golang-migrate, tern (did you mean "goose"?)`,
		},
		{
			name: "shared type names",
			yaml: head + "types:\n  Payload: {}\n  address: {}\n  Job: {}\n  Spec: {}\nqueues: {a: {}}\n",
			want: `skipjack.yaml:4:3: type name "Payload" is reserved: generated packages declare their own Payload
skipjack.yaml:5:3: invalid type name "address": use an exported Go name (a capital letter, then letters and digits)
skipjack.yaml:6:3: type name "Job" is reserved: generated packages declare their own Job
skipjack.yaml:7:3: type name "Spec" is reserved: generated packages declare their own Spec`,
		},
		{
			name: "value cycles",
			yaml: head + "types:\n  A: {b: B, self: \"*A\"}\n  B: {a: A, list: \"[]B\"}\n  C: {c: C}\nqueues: {a: {}}\n",
			want: `skipjack.yaml:5:10: type "A" contains itself by value (A -> B -> A); make one of these fields a pointer
skipjack.yaml:6:10: type "C" contains itself by value (C -> C); make one of these fields a pointer`,
		},
		{
			name: "multiple errors in one file",
			yaml: `version: 1
out: ./jobs
schema: pg_jobs
queues:
  send_email:
    payload:
      to: strnig
      user_id: int64
      user__id: int64
    timeout: soon
  sendemail:
    priorty: true
`,
			want: `skipjack.yaml:3:9: invalid schema "pg_jobs": the pg_ prefix is reserved for Postgres's own schemas
skipjack.yaml:7:11: unknown type "strnig" (did you mean "string"?)
skipjack.yaml:9:7: field "user__id" and field "user_id" (line 8) both become Go field UserID
skipjack.yaml:10:14: timeout: invalid duration "soon" (use Go syntax such as 500ms, 90s, 5m or 1h30m)
skipjack.yaml:11:3: queue "sendemail" and queue "send_email" (line 5) both become package sendemail
skipjack.yaml:12:5: unknown key "priorty" in queue "sendemail" (did you mean "priority"?)`,
		},
		{
			name: "field defaults",
			yaml: head + `types:
  Address:
    zip: {type: string, default: 10115}
queues:
  send_email:
    payload:
      reply_to: {type: string, default: [a]}
      tries: {type: int8, default: 300}
      copies: {type: uint, default: -1}
      urgent: {type: bool, default: "yes"}
      wait: {type: time.Duration, default: soon}
      ratio: {type: float64, default: .nan}
      empty: {type: string, default: ~}
      note: {type: "*string", default: x}
      tags: {type: "[]string", default: [a]}
      meta: {type: "map[string]string", default: {}}
      data: {type: "[]byte", default: eA==}
      doc: {type: json.RawMessage, default: "{}"}
      at: {type: time.Time, default: 2024-01-02T00:00:00Z}
      ship_to: {type: Address, default: {zip: "1"}}
      ip: {type: net/netip.Addr, default: 127.0.0.1}
      bad: {type: strnig, default: x}
`,
			want: `skipjack.yaml:5:34: default of field "zip" (string) must be a string (quote it: "10115"), not a number
skipjack.yaml:9:41: default of field "reply_to" (string) must be a single value, not a list
skipjack.yaml:10:36: default of field "tries" (int8) is out of range: 300
skipjack.yaml:11:37: default of field "copies" (uint) must not be negative
skipjack.yaml:12:37: default of field "urgent" (bool) must be true or false, not the string "yes"
skipjack.yaml:13:44: default of field "wait" (time.Duration) must be a Go duration such as 90s or 1h30m (stored as nanoseconds), not the string "soon"
skipjack.yaml:14:39: default of field "ratio" (float64) must be a finite number, not a number
skipjack.yaml:15:38: default of field "empty" (string) cannot be null; leave it out for its zero value
skipjack.yaml:16:40: field "note" (*string) cannot have a default: a job without it decodes as nil, which tells it apart from a job that sets it; drop the * to give it a default
skipjack.yaml:17:41: field "tags" ([]string) cannot have a default: a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)
skipjack.yaml:18:50: field "meta" (map[string]string) cannot have a default: a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)
skipjack.yaml:19:39: field "data" ([]byte) cannot have a default: a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)
skipjack.yaml:20:45: field "doc" (json.RawMessage) cannot have a default: a job without it decodes as nil; defaults are single values (bool, string, numbers, time.Duration)
skipjack.yaml:21:38: field "at" (time.Time) cannot have a default: a fixed instant makes a poor default; make it "*time.Time" and decide in the handler
skipjack.yaml:22:41: field "ship_to" (Address) cannot have a default: give the fields of Address defaults instead
skipjack.yaml:23:43: field "ip" (net/netip.Addr) cannot have a default: skipjack cannot check the JSON form of net/netip.Addr
skipjack.yaml:24:19: unknown type "strnig" (did you mean "string"?)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse("skipjack.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want errors:\n%s", cfg, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config along with errors")
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

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "skipjack.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing file) = %v, want a not-exist error", err)
	}
}

func TestGoName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"to", "To"},
		{"send_at", "SendAt"},
		{"parcel_id", "ParcelID"},
		{"id", "ID"},
		{"ttl", "TTL"},
		{"url", "URL"},
		{"user_ids", "UserIDs"},
		{"image_urls", "ImageURLs"},
		{"http_api_url", "HTTPAPIURL"},
		{"utf8_name", "UTF8Name"},
		{"db_ts", "DBTS"},
		{"xss", "XSS"},
		{"https", "HTTPS"},
		{"ids", "IDs"},
		{"is", "Is"},
		{"address_2", "Address2"},
		{"a__b_", "AB"},
		{"uuid", "UUID"},
		{"status", "Status"},
		{"json_body", "JSONBody"},
	}
	for _, tt := range tests {
		if got := GoName(tt.in); got != tt.want {
			t.Errorf("GoName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzLoad loads arbitrary files, seeded with every golden input of the
// repository and the examples of this package. Whatever the input, Load
// must not panic, must return a config or errors, never both or neither,
// and every error must be positioned "file:line:col: message" inside the
// file; a config it accepts must hold valid schedule payloads and unique
// keys that name payload fields.
func FuzzLoad(f *testing.F) {
	goldens, err := filepath.Glob("../../golden/*/skipjack.yaml")
	if err != nil {
		f.Fatal(err)
	}
	more, err := filepath.Glob("../../golden/*/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range append(goldens, more...) {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(contractExample)
	f.Add(head + "queues:\n  a: {payload: {x: \"map[string][]*Foo\"}}\n")
	f.Add("a: &x [*x]\n")
	f.Add(head + `types:
  Address: {street: string, zip: "*string"}
queues:
  send_digest:
    payload:
      user_id: int64
      week: {type: string, deprecated: true}
      at: time.Time
      ship_to: Address
      raw: json.RawMessage
    unique: {by: [user_id, week], states: [pending, running]}
    max_payload_bytes: 1024
    schedule:
      - cron: "0 6 * * 1"
        timezone: Europe/Berlin
        payload: {user_id: 1, week: "w", at: 2024-01-02T15:04:05Z, ship_to: {zip: null}, raw: {a: [1]}}
        missed: once
      - cron: "@every 30s"
`)
	positioned := regexp.MustCompile(`^skipjack\.yaml:(\d+):(\d+): \S`)
	// One file per fuzzing process, rewritten by every run (runs of one
	// process are sequential).
	path := filepath.Join(f.TempDir(), "skipjack.yaml")
	f.Fuzz(func(t *testing.T, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path)
		if err == nil {
			if cfg == nil {
				t.Fatal("no config and no error")
			}
			checkAccepted(t, cfg)
			return
		}
		if cfg != nil {
			t.Fatal("a config along with errors")
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error is not a non-empty Errors: %v", err)
		}
		// YAML also breaks lines at \r, NEL, LS and PS; counting each (and
		// \r\n twice) bounds the number of lines from above.
		lines := 1
		for _, r := range data {
			switch r {
			case '\n', '\r', '\u0085', '\u2028', '\u2029':
				lines++
			}
		}
		for _, e := range errs {
			e.File = "skipjack.yaml"
			m := positioned.FindStringSubmatch(e.Error())
			if m == nil || strings.Contains(e.Msg, "yaml.Node") || strings.Contains(e.Msg, "\n") {
				t.Errorf("error not positioned as file:line:col: message: %q", e.Error())
				continue
			}
			if e.Line > lines {
				t.Errorf("error on line %d of a %d-line file: %v", e.Line, lines, e)
			}
		}
	})
}

// checkAccepted checks invariants of a config that Load accepted.
func checkAccepted(t *testing.T, cfg *Config) {
	t.Helper()
	for _, q := range cfg.Queues {
		keys := map[string]bool{}
		for _, f := range q.Payload {
			if f.Type == nil {
				t.Errorf("queue %s: field %s without a type", q.Name, f.Key)
			}
			keys[f.Key] = true
		}
		if q.Unique != nil {
			for _, k := range q.Unique.By {
				if !keys[k] {
					t.Errorf("queue %s: unique key %q is not a payload field", q.Name, k)
				}
			}
		}
		for _, s := range q.Schedule {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal([]byte(s.PayloadJSON), &obj); err != nil {
				t.Errorf("queue %s: schedule payload %s is not a JSON object: %v", q.Name, s.PayloadJSON, err)
			}
			for k := range obj {
				if !keys[k] {
					t.Errorf("queue %s: schedule payload key %q is not a payload field", q.Name, k)
				}
			}
			if s.Every != 0 && s.Every < MinEvery {
				t.Errorf("queue %s: schedule every %s", q.Name, s.Every)
			}
		}
	}
}
