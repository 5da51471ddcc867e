package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// This file dispatches worker events to WorkerConfig.Hooks: the base
// interface and the optional ones (skipjack.JobStartHook, ...), checked
// with a type assertion per event. Every call is guarded, so a hook that
// panics is logged and cannot take a handler goroutine, the fetcher or the
// flusher down with it.

// jobInfo describes an attempt to the hooks.
func (r *runner[T]) jobInfo(job *skipjack.Job[T]) skipjack.JobInfo {
	return skipjack.JobInfo{
		Queue:       r.spec.Name,
		ID:          job.ID,
		Attempt:     job.Attempt,
		MaxAttempts: job.MaxAttempts,
		Priority:    job.Priority,
		Rescues:     job.Rescues,
		CreatedAt:   job.CreatedAt,
		RunAt:       job.RunAt,
		Worker:      r.cfg.WorkerID,
		Trace:       job.Trace,
	}
}

// jobStart calls the JobStartHook, if any, and returns the context the
// handler gets: the hook's, or ctx when there is no hook, it returned nil
// or it panicked.
func (r *runner[T]) jobStart(ctx context.Context, job *skipjack.Job[T]) (out context.Context) {
	h, ok := r.cfg.Hooks.(skipjack.JobStartHook)
	if !ok {
		return ctx
	}
	out = ctx
	defer r.recoverHook("JobStart")
	if c := h.JobStart(ctx, r.jobInfo(job)); c != nil {
		out = c
	}
	return out
}

// jobEnd reports a finished attempt: to Hooks.JobDone, to the JobEndHook
// if any, and to the debug log when it failed. ctx is the context
// jobStart returned; res is the resolution the worker writes (ignored when
// err is nil).
func (r *runner[T]) jobEnd(ctx context.Context, job *skipjack.Job[T], took time.Duration, err error, res Resolution) {
	if err != nil {
		r.log.Debug("skipjack: job attempt failed", "job_id", job.ID, "attempt", job.Attempt, "error", err)
	}
	if r.cfg.Hooks == nil {
		return
	}
	r.guard("JobDone", func() { r.cfg.Hooks.JobDone(r.spec.Name, job.ID, job.Attempt, took, err) })
	if h, ok := r.cfg.Hooks.(skipjack.JobEndHook); ok {
		out, delay := attemptOutcome(job.Attempt, job.MaxAttempts, err, res, context.Cause(ctx))
		result := skipjack.AttemptResult{Outcome: out, Err: err, Delay: delay, Took: took}
		r.guard("JobEnd", func() { h.JobEnd(ctx, r.jobInfo(job), result) })
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

// claimDone reports a claim statement: to Hooks.Claimed when it succeeded
// and to the ClaimHook if any.
func (r *runner[T]) claimDone(limit, n int, took time.Duration, err error) {
	if r.cfg.Hooks == nil {
		return
	}
	if err == nil {
		r.guard("Claimed", func() { r.cfg.Hooks.Claimed(r.spec.Name, n, took) })
	}
	if h, ok := r.cfg.Hooks.(skipjack.ClaimHook); ok {
		c := skipjack.ClaimInfo{Queue: r.spec.Name, Limit: limit, Jobs: n, Took: took, Err: err}
		r.guard("ClaimDone", func() { h.ClaimDone(c) })
	}
}

// ackDone reports a batched write of results to the AckHook, if any.
func (r *runner[T]) ackDone(op string, jobs, matched int, took time.Duration, err error) {
	if h, ok := r.cfg.Hooks.(skipjack.AckHook); ok {
		a := skipjack.AckInfo{Queue: r.spec.Name, Op: op, Jobs: jobs, Matched: matched, Took: took, Err: err}
		r.guard("AckDone", func() { h.AckDone(a) })
	}
}

// guard calls f, recovering and logging a panic of the hook it calls.
func (r *runner[T]) guard(hook string, f func()) {
	defer r.recoverHook(hook)
	f()
}

// recoverHook, deferred, recovers a panicking hook and logs it with its
// stack.
func (r *runner[T]) recoverHook(hook string) {
	if p := recover(); p != nil {
		r.log.Error("skipjack: hook panicked; ignoring it",
			"hook", hook, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	}
}
