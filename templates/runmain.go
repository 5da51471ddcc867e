package templates

// RunMain renders, from a RunMainFile, the temporary main package that the
// skipjack CLI builds inside the user's module for migrate, stats and jobs,
// so that those commands run the module's own generated code.
const RunMain = "runmain.go.tmpl"

// RunMainFile is the model of the temporary program.
type RunMainFile struct {
	// Config is the config's name.
	Config string
	// Shared is the shared generated package, imported as "shared".
	Shared string
	// Queues are the live queues in YAML order.
	Queues []RunMainQueue
}

// RunMainQueue is one queue the temporary program reaches.
type RunMainQueue struct {
	// Name is the queue's YAML name (send_email).
	Name string
	// Import is the queue package, imported under an alias that cannot
	// collide with the program's other imports.
	Import Import
}
