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
	// Pos is where the queue's name is written.
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
