package skipjack

import (
	"context"
	"sync/atomic"

	"github.com/skipjack-dev/skipjack/runtime/internal/link"
)

// TracePropagator carries a trace context from the code that enqueues a
// job to the attempts that run it, so a tracing system can show the
// handler's work as part of the request that caused it. This package
// stores the map Inject returns with the job (in the nullable trace column
// of its table) and hands it back unchanged as Job.Trace and JobInfo.Trace;
// it never interprets it. The OpenTelemetry adapter
// (github.com/skipjack-dev/skipjack/otel) provides one that writes W3C
// traceparent and tracestate, and a JobStartHook that reads them.
type TracePropagator interface {
	// Inject returns the trace context of ctx as a small string map, or
	// nil (or an empty map) when ctx carries none; the job then stores
	// NULL. It is called once per Enqueue or EnqueueMany call, on the
	// caller's goroutine, and must be safe for concurrent use.
	Inject(ctx context.Context) map[string]string
}

// MaxTraceBytes caps the JSON encoding of the map a TracePropagator
// returns. A larger map (a propagator that carries a big baggage, say) is
// not stored, so tracing can never bloat a queue's rows or fail an
// enqueue; neither can a value with a NUL character, which jsonb rejects.
const MaxTraceBytes = 4096

// propagatorBox lets an atomic.Pointer hold an interface value.
type propagatorBox struct{ p TracePropagator }

// tracePropagator is the process's TracePropagator, nil for none.
var tracePropagator atomic.Pointer[propagatorBox]

// SetTracePropagator makes every Enqueue and EnqueueMany call of every
// queue in the process store the trace context p.Inject returns for the
// call's ctx with the jobs it inserts; nil turns it off again (the
// default). Call it once at start-up, next to the tracing SDK's own
// set-up, rather than passing an option to every enqueue: enqueues happen
// all over a code base, and a propagator is a property of the process (as
// OpenTelemetry's global propagator is). Jobs inserted by SQL producers
// and periodic jobs have no trace context.
func SetTracePropagator(p TracePropagator) {
	if p == nil {
		tracePropagator.Store(nil)
		return
	}
	tracePropagator.Store(&propagatorBox{p})
}

// injectTrace returns the trace context of ctx per the process's
// TracePropagator, or nil without one.
func injectTrace(ctx context.Context) map[string]string {
	b := tracePropagator.Load()
	if b == nil {
		return nil
	}
	return b.p.Inject(ctx)
}

func init() { link.InjectTrace = injectTrace }
