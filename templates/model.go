package templates

// Import is one import of a generated file.
type Import struct {
	// Name is the import's explicit name, or "" for the package's own name.
	Name string
	// Path is the import path.
	Path string
}

// Field is one field of a generated struct.
type Field struct {
	// Name is the exported Go name (ParcelID).
	Name string
	// Type is the Go type expression as it reads in the generated file.
	Type string
	// Key is the JSON key (parcel_id).
	Key string
	// Deprecated marks a field declared with deprecated: true.
	Deprecated bool
	// Default is the Go expression of the field's default ("" for none),
	// which a JSON object without Key decodes with.
	Default string
}

// Struct is a generated struct.
type Struct struct {
	// Name is the struct's Go name.
	Name string
	// Doc is the struct's doc comment text, without the leading "// ".
	Doc string
	// Fields are the struct's fields in YAML order.
	Fields []Field
	// JSON is the file's name of package encoding/json when a field has a
	// default, for the UnmarshalJSON method that fills it in; "" when no
	// field has one (and the struct has no such method).
	JSON string
}

// Alias re-exports a shared type in a queue package.
type Alias struct {
	// Name is the alias and the shared type's name.
	Name string
	// Target is the qualified shared type (shop.Address).
	Target string
}

// QueueFile is the model of a queue package's queue.go.
type QueueFile struct {
	// Package is the Go package name (sendemail).
	Package string
	// Queue is the queue's YAML name (send_email).
	Queue string
	// Table is the quoted, schema-qualified table name.
	Table string
	// Imports are every import of the file, grouped: standard library
	// first, then the rest, each group sorted.
	StdImports, OtherImports []Import
	// Payload is the payload struct.
	Payload Struct
	// Aliases re-export the shared types the payload uses.
	Aliases []Alias
	// Settings are the lines of the Spec literal's fields ("Name: Name,
	// MaxAttempts: 25,"), related settings together, zero values left out.
	Settings []string
	// Unique reports a unique key.
	Unique bool
	// Schedules are Go expressions building the queue's periodic jobs.
	Schedules []string
	// Output is the struct a handler records with SetOutput; nil when the
	// queue declares no output.
	Output *Struct
}

// TypesFile is the model of the shared package's types.go.
type TypesFile struct {
	// Package is the shared package's name.
	Package string
	// StdImports and OtherImports are the file's imports.
	StdImports, OtherImports []Import
	// Structs are the shared structs in YAML order.
	Structs []Struct
}

// MigrateFile is the model of the shared package's migrate.go.
type MigrateFile struct {
	// Package is the shared package's name.
	Package string
	// Config is the config's name, which keys migration tracking.
	Config string
	// Schema is the Postgres schema of the queue tables.
	Schema string
	// Migrations are the embedded migrations in version order.
	Migrations []Migration
}

// Migration is one embedded migration.
type Migration struct {
	// Version is the migration's number.
	Version int
	// Name is its file name without extension.
	Name string
	// Up is its up SQL as a Go string literal.
	Up string
}

// WorkflowFile is the model of a workflow package's workflow.go.
type WorkflowFile struct {
	// Package is the Go package name (fulfilorder).
	Package string
	// Workflow is the workflow's YAML name (fulfil_order).
	Workflow string
	// StdImports and OtherImports are the file's imports.
	StdImports, OtherImports []Import
	// Steps are the steps, upstream steps first.
	Steps []WorkflowStep
	// Workflows and StepsTable are the Go string literals of the schema's
	// workflows and steps tables.
	Workflows, StepsTable string
	// Start is the Go string literal of the statement Start runs.
	Start string
	// Outputs are the steps whose queues declare an output.
	Outputs []WorkflowStep
}

// WorkflowStep is one step of a WorkflowFile.
type WorkflowStep struct {
	// Name is the step's YAML name (charge) and Field its Go name (Charge).
	Name, Field string
	// Queue is the queue's YAML name, Pkg the name its package is imported
	// as, and Table the Go string literal of its table.
	Queue, Pkg, Table string
	// After is what the step runs after, for its doc comment ("" for none).
	After string
	// AfterList is the Go literal of the steps it runs after
	// ([]string{"a", "b"}), "" for none.
	AfterList string
	// MaxPayloadBytes is the queue's max_payload_bytes.
	MaxPayloadBytes int
}
