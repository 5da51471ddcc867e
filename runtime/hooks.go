package skipjack

import (
	"context"
	"fmt"
	"time"
)

// The optional hook interfaces below extend Hooks without breaking its
// implementers, the way pgx's tracers do: a worker checks once per event
// whether its WorkerConfig.Hooks value also implements one of them, and
// calls it when it does. New events arrive as new interfaces; the event
// structs may gain fields. A hook that panics is recovered and logged at
// Error level; the job is not affected.

// JobInfo describes one attempt of a job to the hooks.
type JobInfo struct {
	// Queue is the queue's name as declared in skipjack.yaml.
	Queue string
	// ID is the job's primary key in its queue table.
	ID int64
	// Attempt is the number of this attempt, starting at 1.
	Attempt int
	// MaxAttempts is the attempt after which a failing job is marked failed.
	MaxAttempts int
	// Priority is the job's priority, 0 (first) to 9 (last).
	Priority int
	// Rescues counts how often a lapsed lease of this job was rescued.
	Rescues int
	// CreatedAt is when the job was enqueued (database clock).
	CreatedAt time.Time
	// RunAt is when the job became (or was scheduled to become) runnable;
	// time.Since(RunAt) at JobStart is how long it waited for a worker.
	RunAt time.Time
	// Worker is the WorkerID of the worker running the attempt.
	Worker string
	// Trace is the trace context of the Enqueue call that inserted the job
	// (Job.Trace): what the process's TracePropagator injected, nil for
	// none. A JobStartHook extracts it to start the attempt's span as part
	// of the enqueuer's trace. Hooks must not modify it.
	Trace map[string]string
}

// Outcome says how one attempt of a job ended.
type Outcome string

// The outcomes of an attempt.
const (
	// OutcomeCompleted: the handler returned nil; the job is acknowledged.
	OutcomeCompleted Outcome = "completed"
	// OutcomeRetried: the handler failed and the job runs again after a
	// backoff delay (AttemptResult.Delay).
	OutcomeRetried Outcome = "retried"
	// OutcomeSnoozed: the handler returned Snooze; the job runs again after
	// AttemptResult.Delay and the attempt is not counted.
	OutcomeSnoozed Outcome = "snoozed"
	// OutcomeFailed: the job is failed for good: the handler returned
	// Permanent, the last attempt failed, or the payload did not decode.
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: an operator cancelled the job while it ran (its
	// handler's context was cancelled with ErrCancelled); the job ends
	// failed whatever the handler returned.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeLeaseLost: the worker lost the job's lease while the handler
	// ran (its context was cancelled with ErrLeaseLost); the result is
	// dropped and the job runs again elsewhere.
	OutcomeLeaseLost Outcome = "lease_lost"
)

// AttemptResult is how one attempt of a job ended.
type AttemptResult struct {
	// Outcome says what happens to the job next, as the worker knows it
	// when the handler returns: a cancel the worker has not seen yet (it
	// learns of cancels at its next heartbeat) still fails the job when
	// the result is written, whatever this says.
	Outcome Outcome
	// Err is the handler's error, nil when it returned nil. A timeout is
	// reported as an error saying so (wrapping the handler's own error, if
	// any), a panic as a *PanicError, an undecodable payload as the decode
	// error.
	Err error
	// Delay is how long until the job runs again, for OutcomeRetried and
	// OutcomeSnoozed (as sent to the database, which adds it to now()).
	Delay time.Duration
	// Took is how long the handler ran.
	Took time.Duration
}

// JobStartHook is an optional interface of Hooks. JobStart is called on the
// handler's goroutine right before the handler runs, with the context the
// handler would get; the context it returns (which must derive from ctx) is
// passed to the handler instead, so a tracing adapter can start a span
// here. Returning ctx unchanged is fine.
type JobStartHook interface {
	JobStart(ctx context.Context, job JobInfo) context.Context
}

// JobEndHook is an optional interface of Hooks. JobEnd is called on the
// handler's goroutine after the handler returned, with the context
// JobStart returned (possibly already cancelled), before the result is
// written.
type JobEndHook interface {
	JobEnd(ctx context.Context, job JobInfo, res AttemptResult)
}

// ClaimInfo describes one claim statement.
type ClaimInfo struct {
	// Queue is the queue's name.
	Queue string
	// Limit is how many jobs the statement was allowed to take.
	Limit int
	// Jobs is how many jobs it took.
	Jobs int
	// Took is how long the statement ran.
	Took time.Duration
	// Err is the statement's error, or nil.
	Err error
}

// ClaimHook is an optional interface of Hooks. ClaimDone is called after
// every claim statement, failed ones included.
type ClaimHook interface {
	ClaimDone(c ClaimInfo)
}

// The operations of AckInfo.
const (
	// AckComplete acknowledges completed jobs.
	AckComplete = "complete"
	// AckResolve writes retries, failures and snoozes.
	AckResolve = "resolve"
)

// AckInfo describes one batched write of job results.
type AckInfo struct {
	// Queue is the queue's name.
	Queue string
	// Op is AckComplete or AckResolve.
	Op string
	// Jobs is how many results the statement carried.
	Jobs int
	// Matched is how many of them still owned their job; the others had
	// lost their lease and their jobs may run again.
	Matched int
	// Took is how long the statement ran.
	Took time.Duration
	// Err is the statement's error, or nil; failed writes are retried.
	Err error
}

// AckHook is an optional interface of Hooks. AckDone is called after every
// batched write of job results, failed ones included.
type AckHook interface {
	AckDone(a AckInfo)
}

// JobDoneHook is the event every Hooks had to implement before the
// optional interfaces came; a Hooks that implements it still receives it,
// after each handler returns, with the queue, the job's id and attempt,
// how long the handler ran, and its error (nil on success).
//
// Deprecated: implement JobEndHook, which reports the same attempt with
// its outcome.
type JobDoneHook interface {
	JobDone(queue string, id int64, attempt int, took time.Duration, err error)
}

// ClaimedHook is the other event every Hooks had to implement; a Hooks
// that implements it still receives it after each successful claim
// statement, with the number of jobs it returned and how long it took.
//
// Deprecated: implement ClaimHook, which reports failed claims too.
type ClaimedHook interface {
	Claimed(queue string, n int, took time.Duration)
}

// NopHooks implements no event. Hooks needed two methods once, and
// NopHooks was embedded for them; it is kept so that such types compile.
//
// Deprecated: Hooks has no required methods; embedding NopHooks does
// nothing.
type NopHooks struct{}

// MultiHooks returns Hooks that call each of hs in turn (nil entries are
// skipped), for every interface each of them implements: JobStart chains
// the contexts in order, so the last hook's context reaches the handler.
func MultiHooks(hs ...Hooks) Hooks {
	var m multiHooks
	for _, h := range hs {
		if h != nil {
			m = append(m, h)
		}
	}
	return m
}

type multiHooks []Hooks

func (m multiHooks) JobDone(queue string, id int64, attempt int, took time.Duration, err error) {
	for _, h := range m {
		if d, ok := h.(JobDoneHook); ok {
			d.JobDone(queue, id, attempt, took, err)
		}
	}
}

func (m multiHooks) Claimed(queue string, n int, took time.Duration) {
	for _, h := range m {
		if d, ok := h.(ClaimedHook); ok {
			d.Claimed(queue, n, took)
		}
	}
}

func (m multiHooks) JobStart(ctx context.Context, job JobInfo) context.Context {
	for _, h := range m {
		if s, ok := h.(JobStartHook); ok {
			if c := s.JobStart(ctx, job); c != nil {
				ctx = c
			}
		}
	}
	return ctx
}

func (m multiHooks) JobEnd(ctx context.Context, job JobInfo, res AttemptResult) {
	for _, h := range m {
		if e, ok := h.(JobEndHook); ok {
			e.JobEnd(ctx, job, res)
		}
	}
}

func (m multiHooks) ClaimDone(c ClaimInfo) {
	for _, h := range m {
		if x, ok := h.(ClaimHook); ok {
			x.ClaimDone(c)
		}
	}
}

func (m multiHooks) AckDone(a AckInfo) {
	for _, h := range m {
		if x, ok := h.(AckHook); ok {
			x.AckDone(a)
		}
	}
}

// PanicError is the error of an attempt whose handler panicked: the
// worker recovers the panic, logs it with its stack and treats it as a
// failed attempt. Hooks and test helpers find it with errors.As.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the handler goroutine's stack at the panic.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
