package skipjack

import "context"

// Middleware wraps the handler of every attempt of a worker's jobs, as
// net/http middleware wraps a handler: it runs code before and after next
// (which runs the rest of the chain and then the handler), may pass next a
// context derived from ctx (with a value, a span, a tighter deadline), may
// return without calling next (the handler never runs and the job ends with
// the middleware's result), and may return another error than next's (turn
// an error into Snooze, Permanent or nil, say). What it returns is the
// attempt's result, resolved exactly like a handler's: nil completes the
// job, Snooze runs it again later without counting the attempt, Permanent
// fails it now, and any other error retries it with backoff.
//
// Middleware sees the job as JobInfo (queue, id, attempt, ...), not its
// typed payload, so one middleware serves the workers of every queue and a
// RunGroup. Wrap the handler function itself for logic that needs the
// payload.
//
// A middleware runs on the handler's goroutine, inside what the worker
// treats as the handler: the queue's timeout covers it (ctx carries the
// attempt's deadline and the cancellations of shutdown, lease loss and
// operators), a panic in it is recovered and counted as a failed attempt
// (a *PanicError) as a handler's panic is, the JobStartHook runs before
// the outermost middleware and the JobEndHook after it, with its result.
// A context passed to next must derive from ctx, or the handler loses
// those cancellations; a nil one passes ctx on. Call next at most once:
// each call runs the handler again within the same attempt. Jobs whose
// payload does not decode fail without running the chain.
//
// Order: the first middleware of a list is the outermost (it runs first
// before and last after), as in a net/http chain written
// m0(m1(m2(handler))). In RunGroup, GroupConfig.Middleware wraps each
// worker's WorkerConfig.Middleware.
type Middleware func(ctx context.Context, job JobInfo, next func(context.Context) error) error
