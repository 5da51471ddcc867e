package skipjackimpl

import (
	"context"
	"time"
)

// Handler timeouts without a timer per job.
//
// Every attempt of a queue gets the same timeout, so deadlines expire in
// the order handlers start. A run keeps its running attempts in that order
// in an intrusive list (linked when a handler starts, unlinked when it
// returns, both under r.mu) and one goroutine cancels the attempts at the
// head of the list whose deadline passed, with cause errTimeout, on the
// job's own context. A context.WithTimeoutCause per job cost a timer, a
// second cancelable context and the bookkeeping that links the two: about
// half of the worker's allocations per job (BENCHMARKS.md).

// attemptContext is the context a handler runs with when its run keeps
// the timeout list: the job's context, which the list cancels at the
// deadline, reporting that deadline as context.WithTimeout would, and
// context.DeadlineExceeded as its error once the deadline cancelled it.
type attemptContext struct {
	context.Context
	deadline time.Time
}

// Deadline returns the attempt's deadline, or the parent's when earlier.
func (c *attemptContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Err returns context.DeadlineExceeded once the attempt's deadline
// cancelled it, and the parent's error otherwise.
func (c *attemptContext) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == errTimeout {
		return context.DeadlineExceeded
	}
	return err
}

// timeoutList is the list of running attempts in deadline order.
type timeoutList[T any] struct {
	head, tail *entry[T]
	wake       chan struct{} // the list was empty and got an attempt
}

// deadline returns when the attempt of e, whose handler started at
// e.startedAt, times out.
func (r *runner[T]) deadline(e *entry[T]) time.Time {
	return e.startedAt.Add(r.spec.Timeout)
}

// startTimeoutLocked links e, whose handler just started (e.startedAt), at
// the tail of the list. r.mu is held.
func (r *runner[T]) startTimeoutLocked(e *entry[T]) {
	l := r.timeouts
	e.timed = true
	e.tnext = nil
	e.tprev = l.tail
	if l.tail == nil {
		l.head = e
		signal(l.wake)
	} else {
		l.tail.tnext = e
	}
	l.tail = e
}

// stopTimeoutLocked unlinks e from the list, if it is linked. r.mu is held.
func (r *runner[T]) stopTimeoutLocked(e *entry[T]) {
	if !e.timed {
		return
	}
	l := r.timeouts
	if e.tprev == nil {
		l.head = e.tnext
	} else {
		e.tprev.tnext = e.tnext
	}
	if e.tnext == nil {
		l.tail = e.tprev
	} else {
		e.tnext.tprev = e.tprev
	}
	e.tprev, e.tnext, e.timed = nil, nil, false
}

// timeoutLoop cancels running attempts at their deadlines until stop is
// closed.
func (r *runner[T]) timeoutLoop(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := r.expireTimeouts(time.Now())
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-stop:
			return
		case <-r.timeouts.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// expireTimeouts cancels, with cause errTimeout, the attempts whose
// deadline is not after now, and returns how long until the next deadline
// (0 when no attempt runs).
func (r *runner[T]) expireTimeouts(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.timeouts
	for l.head != nil && !r.deadline(l.head).After(now) {
		e := l.head
		r.stopTimeoutLocked(e)
		if e.cancel != nil {
			e.cancel(errTimeout)
		}
	}
	if l.head == nil {
		return 0
	}
	return r.deadline(l.head).Sub(now)
}
