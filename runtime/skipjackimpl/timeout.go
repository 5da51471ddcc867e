package skipjackimpl

import (
	"context"
	"sync"
	"time"
)

// Handler timeouts without a timer per job.
//
// Every attempt of a queue gets the same timeout, so deadlines expire in
// the order handlers start. A run keeps its running attempts in that order
// in an intrusive list (linked when a handler starts, unlinked when it
// returns, both under the run's lock) and one goroutine cancels the attempts at the
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

// timeoutList is the list of a run's running attempts in deadline order.
// The run's lock guards it (the methods named ...Locked are called with it
// held, the others take it); a nil list keeps nothing (RunJob's attempts
// get a timer of their own).
type timeoutList[T any] struct {
	mu         *sync.Mutex // the run's
	timeout    time.Duration
	head, tail *entry[T]
	wake       chan struct{} // the list was empty and got an attempt
}

// deadline returns when the attempt of e, whose handler started at
// e.startedAt, times out.
func (l *timeoutList[T]) deadline(e *entry[T]) time.Time {
	return e.startedAt.Add(l.timeout)
}

// startLocked records that e's handler starts now and links it at the
// tail of the list.
func (l *timeoutList[T]) startLocked(e *entry[T]) {
	e.startedAt = time.Now()
	if l == nil {
		return
	}
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

// removeLocked unlinks e from the list, if it is linked.
func (l *timeoutList[T]) removeLocked(e *entry[T]) {
	if !e.timed {
		return
	}
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

// loop cancels running attempts at their deadlines until stop is closed.
func (l *timeoutList[T]) loop(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := l.expire(time.Now())
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-stop:
			return
		case <-l.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// expire cancels, with cause errTimeout, the attempts whose deadline is
// not after now, and returns how long until the next deadline (0 when no
// attempt runs).
func (l *timeoutList[T]) expire(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.head != nil && !l.deadline(l.head).After(now) {
		e := l.head
		l.removeLocked(e)
		if e.cancel != nil {
			e.cancel(errTimeout)
		}
	}
	if l.head == nil {
		return 0
	}
	return l.deadline(l.head).Sub(now)
}
