package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// hookCaller dispatches one run's events to WorkerConfig.Hooks, through
// the interfaces the hooks implement (skipjack.JobStartHook, ...), checked
// with a type assertion per event. Every call is guarded, so a hook that
// panics is logged and cannot take a handler goroutine, the fetcher or the
// flusher down with it.
type hookCaller[T any] struct {
	hooks    skipjack.Hooks // nil: no hooks
	queue    string
	workerID string
	log      *slog.Logger
}

// newHookCaller returns the hook caller of a run of the worker configured
// by cfg on queue, warning once when cfg.Hooks implements no event.
func newHookCaller[T any](queue string, cfg skipjack.WorkerConfig, log *slog.Logger) *hookCaller[T] {
	h := &hookCaller[T]{hooks: cfg.Hooks, queue: queue, workerID: cfg.WorkerID, log: log}
	if h.hooks != nil && !hasEvents(h.hooks) {
		log.Warn("skipjack: WorkerConfig.Hooks implements none of the hook interfaces (JobStartHook, JobEndHook, ClaimHook, AckHook); it receives no events",
			"hooks", fmt.Sprintf("%T", h.hooks))
	}
	return h
}

// jobDoneHook and claimedHook are the events skipjack.Hooks once required
// (skipjack.JobDoneHook and skipjack.ClaimedHook, deprecated): hooks that
// still implement them still receive them.
type (
	jobDoneHook interface {
		JobDone(queue string, id int64, attempt int, took time.Duration, err error)
	}
	claimedHook interface {
		Claimed(queue string, n int, took time.Duration)
	}
)

// hasEvents reports whether hooks implements any of the hook interfaces.
func hasEvents(hooks skipjack.Hooks) bool {
	switch hooks.(type) {
	case skipjack.JobStartHook, skipjack.JobEndHook, skipjack.ClaimHook, skipjack.AckHook, jobDoneHook, claimedHook:
		return true
	}
	return false
}

// jobInfo describes an attempt to the hooks.
func (h *hookCaller[T]) jobInfo(job *skipjack.Job[T]) skipjack.JobInfo {
	return skipjack.JobInfo{
		Queue:       h.queue,
		ID:          job.ID,
		Attempt:     job.Attempt,
		MaxAttempts: job.MaxAttempts,
		Priority:    job.Priority,
		Rescues:     job.Rescues,
		CreatedAt:   job.CreatedAt,
		RunAt:       job.RunAt,
		Worker:      h.workerID,
		Trace:       job.Trace,
	}
}

// jobStart calls the JobStartHook, if any, and returns the context the
// handler gets: the hook's, or ctx when there is no hook, it returned nil
// or it panicked.
func (h *hookCaller[T]) jobStart(ctx context.Context, job *skipjack.Job[T]) (out context.Context) {
	s, ok := h.hooks.(skipjack.JobStartHook)
	if !ok {
		return ctx
	}
	out = ctx
	defer h.recoverHook("JobStart")
	if c := s.JobStart(ctx, h.jobInfo(job)); c != nil {
		out = c
	}
	return out
}

// jobEnd reports a finished attempt: to the JobEndHook (and the deprecated
// JobDoneHook), if any, and to the debug log when it failed. ctx is the context
// jobStart returned; res is the resolution the worker writes (ignored when
// err is nil).
func (h *hookCaller[T]) jobEnd(ctx context.Context, job *skipjack.Job[T], took time.Duration, err error, res Resolution) {
	if err != nil {
		h.log.Debug("skipjack: job attempt failed", "job_id", job.ID, "attempt", job.Attempt, "error", err)
	}
	if h.hooks == nil {
		return
	}
	if d, ok := h.hooks.(jobDoneHook); ok {
		h.guard("JobDone", func() { d.JobDone(h.queue, job.ID, job.Attempt, took, err) })
	}
	if e, ok := h.hooks.(skipjack.JobEndHook); ok {
		out, delay := attemptOutcome(job.Attempt, job.MaxAttempts, err, res, context.Cause(ctx))
		result := skipjack.AttemptResult{Outcome: out, Err: err, Delay: delay, Took: took}
		h.guard("JobEnd", func() { e.JobEnd(ctx, h.jobInfo(job), result) })
	}
}

// attemptOutcome says what an attempt's result does to its job, the way
// the database decides it: the result of an attempt whose lease was lost
// is dropped, a job an operator cancelled while it ran fails whatever its
// handler returned, a retry of the last attempt fails. cause is the cause
// of the handler context's cancellation, if any.
func attemptOutcome(attempt, maxAttempts int, err error, res Resolution, cause error) (skipjack.Outcome, time.Duration) {
	switch {
	case errors.Is(cause, skipjack.ErrLeaseLost):
		return skipjack.OutcomeLeaseLost, 0
	case errors.Is(cause, skipjack.ErrCancelled):
		return skipjack.OutcomeCancelled, 0
	case err == nil:
		return skipjack.OutcomeCompleted, 0
	}
	switch res.Action {
	case ActionSnooze:
		return skipjack.OutcomeSnoozed, res.Delay
	case ActionRetry:
		if attempt < maxAttempts {
			return skipjack.OutcomeRetried, res.Delay
		}
	}
	return skipjack.OutcomeFailed, 0
}

// claimDone reports a claim statement: to the ClaimHook if any, and to
// the deprecated ClaimedHook when it succeeded.
func (h *hookCaller[T]) claimDone(limit, n int, took time.Duration, err error) {
	if h.hooks == nil {
		return
	}
	if d, ok := h.hooks.(claimedHook); ok && err == nil {
		h.guard("Claimed", func() { d.Claimed(h.queue, n, took) })
	}
	if x, ok := h.hooks.(skipjack.ClaimHook); ok {
		c := skipjack.ClaimInfo{Queue: h.queue, Limit: limit, Jobs: n, Took: took, Err: err}
		h.guard("ClaimDone", func() { x.ClaimDone(c) })
	}
}

// ackDone reports a batched write of results to the AckHook, if any.
func (h *hookCaller[T]) ackDone(op string, jobs, matched int, took time.Duration, err error) {
	if x, ok := h.hooks.(skipjack.AckHook); ok {
		a := skipjack.AckInfo{Queue: h.queue, Op: op, Jobs: jobs, Matched: matched, Took: took, Err: err}
		h.guard("AckDone", func() { x.AckDone(a) })
	}
}

// guard calls f, recovering and logging a panic of the hook it calls.
func (h *hookCaller[T]) guard(hook string, f func()) {
	defer h.recoverHook(hook)
	f()
}

// recoverHook, deferred, recovers a panicking hook and logs it with its
// stack.
func (h *hookCaller[T]) recoverHook(hook string) {
	if p := recover(); p != nil {
		h.log.Error("skipjack: hook panicked; ignoring it",
			"hook", hook, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	}
}
