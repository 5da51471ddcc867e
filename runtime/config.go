package skipjack

import (
	"log/slog"
	"time"
)

// WorkerConfig configures a Worker. The zero value is a good production
// default; every field documents its default.
type WorkerConfig struct {
	// Concurrency is how many handlers run at once. Default 100. The worker
	// also prefetches at most Concurrency further jobs, so one process never
	// holds more than 2*Concurrency jobs of a queue. The pool passed to
	// NewWorker only serves handlers: the worker runs its own statements
	// on a control pool of its own built from that pool's configuration
	// (up to 6 connections, opened on demand), plus one LISTEN connection
	// per process and database. Size the pool to at least the sum of the
	// Concurrency of the workers sharing it when handlers use it; each
	// worker logs a warning at start when it is smaller.
	Concurrency int
	// BatchSize caps how many jobs one claim statement takes and how many
	// acknowledgements one statement carries. Default 200: a claim never
	// takes more than the free capacity (2*Concurrency less the jobs
	// held), so with the default Concurrency it lets an idle worker fill
	// all of it in one statement; burn-down measured about 10% faster
	// than with 100 (BENCHMARKS.md).
	BatchSize int
	// PollInterval is how often an idle worker looks for due jobs when no
	// notification arrives (and the only wake-up of notify: false queues):
	// one claim statement per look, jittered by ±20%. Default 1s.
	PollInterval time.Duration
	// AckDelay is how long a completed job may wait for more
	// acknowledgements before they are flushed together; a full batch
	// (BatchSize) is flushed at once, and so are 100 or more waiting
	// results when the worker has no other job running or prefetched (the
	// end of a burst). Default 25ms: under load batches fill by size long
	// before the delay (burn-down throughput measured the same from 1ms to
	// 100ms), and at moderate rates (a few hundred jobs/s) it turns one
	// commit per job into one per ~10 jobs, while keeping the window in
	// which a crash makes completed jobs run again tiny.
	AckDelay time.Duration
	// ShutdownTimeout is how long in-flight handlers may run after Run's
	// context is cancelled before their own contexts are cancelled; the
	// jobs of handlers that then return an error are released with their
	// attempt restored, not counted as failed attempts. Run then waits a
	// quarter of it more (1s to 5s) for those handlers, flushes results
	// for at most 4s and returns, with an error naming any job whose
	// handler still has not returned. Default 20s, so the whole shutdown
	// fits a 30s container grace period.
	ShutdownTimeout time.Duration
	// Logger receives the worker's structured logs. Default slog.Default().
	Logger *slog.Logger
	// Hooks receives events for metrics and tracing (see Hooks for the
	// optional interfaces it may implement). Default none.
	Hooks Hooks
	// Middleware wraps the handler of every attempt, the first outermost
	// (see Middleware). Default none.
	Middleware []Middleware
	// PollOnly turns LISTEN off entirely: the worker finds jobs only by
	// polling every PollInterval, and keeps no session state across
	// statements, as PgBouncer's transaction pooling requires. Default
	// false (woken by NOTIFY on queues declared with notify: true).
	PollOnly bool
	// WorkerID identifies this worker in the jobs it claims and in their
	// error history. Default hostname:pid:random. Each Run stores it with
	// a suffix of its own ("<WorkerID>/<8 hex digits>", the id of its row
	// in the schema's workers table), so a process restarted with the same
	// WorkerID never vouches for the jobs its predecessor held.
	WorkerID string
}

// Hooks receives worker events, so that metrics or tracing adapters can be
// written outside the runtime. Any value can be Hooks: it receives the
// events of the interfaces it implements, checked at run time:
// JobStartHook (before the handler, may derive its context, for trace
// spans), JobEndHook (the attempt's outcome), ClaimHook and AckHook
// (statement latencies and errors). Run logs a warning when Hooks
// implements none of them. Combine several implementations with
// MultiHooks.
//
// Implementations must be safe for concurrent use and fast: they run on
// the worker's goroutines. A hook that panics is recovered and logged; the
// worker carries on.
//
// Hooks once required two methods, JobDone and Claimed; implementations
// that still have them keep receiving them (see JobDoneHook and
// ClaimedHook).
type Hooks interface{}
