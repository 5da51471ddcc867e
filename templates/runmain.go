package templates

// RunMain renders, from a RunMainFile, the temporary main package that the
// skipjack CLI builds inside the user's module for migrate, stats and jobs,
// so that those commands run the module's own generated code.
//
// Its line 1 is not the skipjack header: the program lives in a hidden
// folder under out while it is built, and a concurrent skipjack check or
// generate must not take it for a stale generated file (Go still sees the
// "Code generated" line 2).
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
