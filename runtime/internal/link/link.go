// Package link connects package skipjack's user-facing types to the engine
// in skipjackimpl without exporting a constructor that users could call:
// skipjack fills in the functions here when it is initialized, and
// skipjackimpl (which imports skipjack, so runs after that) calls them.
package link

import "context"

// SetWorkerRun makes w, a *skipjack.Worker[P] for any P, run run when its
// Run method is called (with a nil group) or skipjack.RunGroup runs it
// (with what the group shares). Package skipjack sets it in its init.
var SetWorkerRun func(w any, run func(context.Context, *Group) error)

// Group is what skipjack.RunGroup shares with each of its workers.
type Group struct {
	// Budget is the group's handler budget, which every handler holds a
	// token of while it runs; nil when the group sets no shared cap.
	Budget *Budget
	// Middleware is the group's []skipjack.Middleware, which wraps each
	// worker's own; nil for none.
	Middleware any
}

// InjectTrace returns the trace context of ctx per the process's
// skipjack.TracePropagator, or nil without one. Package skipjack sets it
// in its init.
var InjectTrace func(ctx context.Context) map[string]string

// SetJobOutput stores the encoded output of a *skipjack.Job[T] (passed as
// any), and JobOutput returns it (nil when none was set); package skipjack
// sets both.
var (
	SetJobOutput func(job any, b []byte)
	JobOutput    func(job any) []byte
)
