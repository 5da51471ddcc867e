// Package config loads and validates skipjack.yaml.
//
// Load reads the file through yaml.v3's Node API so that every error carries
// the file, line and column it is about; it reports every problem of the file
// at once and never consults a Go module or package.
package config

import "time"

// Config is a validated skipjack.yaml with every default applied.
type Config struct {
	// Path is the YAML file's path as given to Load.
	Path string
	// Dir is the absolute folder holding the YAML file; relative paths in
	// the file are relative to it.
	Dir string
	// Version is the config format version (1).
	Version int
	// Name keys migration tracking; defaults to Schema.
	Name string
	// Out is the root folder of the generated Go packages, as written in the
	// YAML (slash-separated, relative to Dir).
	Out string
	// SchemaPos is where schema is written (or the top of the file when
	// missing).
	SchemaPos Pos
	// OutPos is where out is written (or the top of the file when missing).
	OutPos Pos
	// Migrations says where migration files go and in which format.
	Migrations Migrations
	// Schema is the Postgres schema of the queue tables (default skipjack).
	Schema string
	// Types are the shared payload structs, in file order.
	Types []Struct
	// Queues are the declared queues, in file order.
	Queues []Queue
	// QueuesPos is where the queues key is written (or the top of the file
	// when missing).
	QueuesPos Pos
	// Workflows are the declared workflows, in file order.
	Workflows []Workflow
}

// Migrations is the migrations: section.
type Migrations struct {
	// Dir is the folder of migration files, as written (relative to the
	// config's Dir). Default ./migrations.
	Dir string
	// Format is plain, goose, golang-migrate or tern. Default plain.
	Format string
}

// Struct is a named payload struct from types:.
type Struct struct {
	// Name is the struct's name as written (a Go identifier, e.g. Address).
	Name string
	// Fields are the struct's fields in file order.
	Fields []Field
	// Pos is where the struct's name is written.
	Pos Pos
}

// Field is one payload field.
type Field struct {
	// Key is the YAML key, kept as the JSON tag (parcel_id).
	Key string
	// GoName is the exported Go field name (ParcelID).
	GoName string
	// Type is the parsed type expression.
	Type *TypeExpr
	// Deprecated marks a field kept for jobs already queued that producers
	// should stop setting; it may be removed once the queue has drained
	// (long form: key: {type: string, deprecated: true}).
	Deprecated bool
	// Default is the value a job without the field decodes with, as
	// encoding/json encodes it (`"noreply@example.com"`, `3`), or "" for
	// none (long form: key: {type: string, default: "noreply@example.com"}).
	// Only bool, string, numeric and time.Duration fields have defaults.
	Default string
	// Pos is where the field's type is written.
	Pos Pos
}

// TypeKind says which form a TypeExpr has.
type TypeKind int

// The forms of a field type.
const (
	// KindBuiltin is a predeclared or standard type: bool, string, int...,
	// []byte, time.Time, time.Duration, json.RawMessage.
	KindBuiltin TypeKind = iota
	// KindSlice is []Elem.
	KindSlice
	// KindMap is map[string]Elem.
	KindMap
	// KindPointer is *Elem (an optional field).
	KindPointer
	// KindShared is a name from types:.
	KindShared
	// KindExternal is import/path.Type.
	KindExternal
)

// TypeExpr is a parsed field type expression.
type TypeExpr struct {
	Kind TypeKind
	// Name is the builtin's spelling (e.g. "int64", "time.Time",
	// "[]byte"), the shared struct's name, or the external type's name.
	Name string
	// ImportPath is the external type's package import path.
	ImportPath string
	// Elem is the element type of slices, maps and pointers.
	Elem *TypeExpr
}

// Queue is one entry of queues:.
type Queue struct {
	// Name is the queue's name (send_email); also its table name.
	Name string
	// Package is the Go package name: Name without underscores.
	Package string
	// Payload is the payload struct's fields in file order.
	Payload []Field
	// MaxAttempts defaults to 25.
	MaxAttempts int
	// BackoffMin and BackoffMax default to 1s and 1h.
	BackoffMin, BackoffMax time.Duration
	// Timeout defaults to 1m.
	Timeout time.Duration
	// Lease defaults to 30s.
	Lease time.Duration
	// Priority enables per-job priority (default false).
	Priority bool
	// Notify enables NOTIFY on insert (default true).
	Notify bool
	// RetainCompleted defaults to 0 (delete at ack).
	RetainCompleted time.Duration
	// RetainFailed defaults to 720h.
	RetainFailed time.Duration
	// Table holds the table's storage parameters in file order.
	Table []StorageParam
	// Dropped marks a queue whose table the next migration drops.
	Dropped bool
	// Unique makes jobs with equal keys duplicates (nil: no unique key).
	Unique *Unique
	// Limits bound how many jobs of the queue run at once and start per
	// window, all processes together (nil: no limit).
	Limits *Limits
	// Serial makes jobs with equal keys run one at a time in id order (nil:
	// jobs run in parallel).
	Serial *Serial
	// Schedule are the queue's periodic jobs, in file order.
	Schedule []Schedule
	// MaxPayloadBytes caps the size of a job's encoded payload (0: no
	// limit).
	MaxPayloadBytes int
	// Output is the fields of the result a handler records with SetOutput
	// for the workflow steps downstream, in file order (nil: no output).
	Output []Field
	// Pos is where the queue's name is written.
	Pos Pos
}

// Unique is a queue's unique: section. The database enforces it with a
// unique index over the keys, partial on the states.
type Unique struct {
	// By are the payload field keys (YAML keys) that make up the unique
	// key, in the order written; empty means the whole payload.
	By []string
	// States are the job states in which a job counts as a duplicate
	// (default pending, running; always both of them, plus completed or
	// failed for queues that retain those).
	States []string
	// Pos is where the unique key is written.
	Pos Pos
}

// Limits is a queue's limits: section, enforced by the database across all
// the processes that work the queue.
type Limits struct {
	// Concurrency is how many jobs of the queue may be claimed (running or
	// prefetched) at once; 0 means no limit.
	Concurrency int
	// Rate caps how many jobs start per window (nil: no cap).
	Rate *Rate
	// PerKey caps how many jobs of each key may be claimed at once (nil:
	// no cap per key).
	PerKey *PerKey
	// Pos is where limits: is written.
	Pos Pos
}

// Rate is limits.rate: at most Count jobs start in any window of length
// Per.
type Rate struct {
	// Count is how many jobs may start per window (at least 1).
	Count int
	// Per is the window's length (default 1s, at least MinRatePer).
	Per time.Duration
}

// PerKey is limits.per_key: at most Concurrency jobs with equal keys
// claimed (running or prefetched) at once, all processes together.
type PerKey struct {
	// By are the payload field keys whose values make up the key, in the
	// order written.
	By []string
	// Concurrency is how many jobs of one key may be claimed at once (at
	// least 1).
	Concurrency int
	// Pos is where per_key: is written.
	Pos Pos
}

// Serial is a queue's serial: section.
type Serial struct {
	// By are the payload field keys whose values make up the key, in the
	// order written: jobs with equal keys run one at a time, in id order.
	By []string
	// Pos is where serial: is written.
	Pos Pos
}

// Schedule is one periodic job of a queue's schedule: list.
type Schedule struct {
	// Cron is the schedule as written: five cron fields ("0 6 * * 1"), a
	// descriptor (@yearly, @annually, @monthly, @weekly, @daily,
	// @midnight, @hourly) or "@every <duration>".
	Cron string
	// Every is the interval of an "@every <duration>" schedule (at least
	// one second), and 0 for every other form. Its slots are whole
	// multiples of Every since the Unix epoch.
	Every time.Duration
	// Timezone is the IANA time zone the cron fields are read in
	// (default UTC).
	Timezone string
	// PayloadJSON is the payload of the jobs the schedule inserts, as a
	// canonical JSON object: the keys written, in the payload's field
	// order, encoded as encoding/json encodes the payload's Go types.
	// Fields left out are absent (they decode to their zero value).
	PayloadJSON string
	// Missed is what happens to slots missed while no worker ran: "skip"
	// (default: only the next slot runs) or "once" (one job for all the
	// missed slots).
	Missed string
	// Pos is where the schedule's list item is written.
	Pos Pos
}

// StorageParam is one Postgres storage parameter of a queue table.
type StorageParam struct {
	// Name is the parameter (fillfactor, autovacuum_vacuum_scale_factor).
	Name string
	// Value is its value as SQL text (90, 0.01, true).
	Value string
	// Pos is where the parameter is written.
	Pos Pos
}

// Pos is a position in the YAML file.
type Pos struct {
	Line, Col int
}

// LiveQueues returns the queues that are not dropped, in file order.
func (c *Config) LiveQueues() []Queue {
	var live []Queue
	for _, q := range c.Queues {
		if !q.Dropped {
			live = append(live, q)
		}
	}
	return live
}
