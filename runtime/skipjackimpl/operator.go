package skipjackimpl

import (
	"context"
	"time"
)

// What operators do to the jobs a run holds.
//
// Cancel reaches a job wherever it is, and a prefetched job that an
// operator cancelled never starts; Pause stops every start until Resume,
// prefetched jobs included. Both are written to the database first; a
// worker learns of them three ways:
//
//   - Cancel and Pause notify the queue's channel with a payload (see
//     noteCancel, notePause), and the listener hands that to the workers
//     subscribed to it (operatorNotes): a cancel makes the worker read the
//     cancel state of every job it holds at once, a pause makes it give
//     its prefetched jobs back. Once the listener LISTENs (after a worker
//     starts, and after every reconnect) each worker reads both states
//     from the database, for the notifications sent before it did.
//   - A job that waited in prefetch for recheckAfter or more since the run
//     last read its cancel state is checked again just before it starts
//     (recheck): this is how a worker that listens to nothing (PollOnly,
//     notify: false) or missed a notification (its listener reconnecting)
//     still keeps a cancelled job from starting.
//   - The periodic heartbeat reads the cancel state of every held job.

// recheckAfter is how long a prefetched job may wait after the run last
// read its cancel state (at its claim, or a heartbeat) before it is read
// again just before it starts. One statement rechecks every queued job
// that waited half as long, so a worker whose jobs wait in prefetch runs
// at most about one such statement a second; jobs that wait less start
// at once, as before.
const recheckAfter = time.Second

// recheckTimeout bounds the recheck before a job starts: the job waits for
// it. A recheck that fails lets the job start; its heartbeat still
// cancels its handler if it was cancelled.
const recheckTimeout = 2 * time.Second

// operatorNotes acts on the notifications an operator's Cancel and Pause
// send to the queue, on a goroutine of its own that run starts (loop):
// it owns the channels the listener hands them over (nil when polling
// only). A cancel makes the run's leases read the cancel state of every
// held job at once (heartbeat); a pause gives the prefetched jobs back
// (givePausedBack). Once the listener LISTENs, it reads whether the queue
// is paused (pauseMissed). The jobs are the run's, under the run's mu.
type operatorNotes[T any] struct {
	r            *runner[T]
	cancelsNoted <-chan struct{} // an operator cancelled jobs of the queue
	pauseNoted   <-chan struct{} // an operator paused the queue
	listening    <-chan struct{} // the listener (re)started listening: notifications before it were lost
}

// loop acts on the operators' notifications for the queue until stop is
// closed.
func (o *operatorNotes[T]) loop(stop <-chan struct{}) {
	r := o.r
	for {
		select {
		case <-stop:
			return
		case <-o.cancelsNoted:
			if err := r.leases.heartbeat(r.stmtTimeout); err != nil {
				r.log.Warn("skipjack: reading which held jobs were cancelled failed; the next heartbeat reads it again", "error", err)
			}
		case <-o.pauseNoted:
			o.givePausedBack()
		case <-o.listening:
			o.pauseMissed()
		}
	}
}

// pausedReader is the store of a queue whose paused state the run can read
// (every generated queue's; not the fakes of unit tests).
type pausedReader interface {
	isPaused(ctx context.Context) (bool, error)
}

// pauseMissed reads whether the queue is paused once the listener listens
// (after the run started, and after each reconnect), and gives the
// prefetched jobs back if it is: a pause notified while the listener was
// not listening reached no worker, and without this their prefetched jobs
// would start (claims see the pause themselves). A read that fails is
// logged; the pause then holds for claims only.
func (o *operatorNotes[T]) pauseMissed() {
	o.givePausedBackIfPaused(o.r.stmtTimeout, "skipjack: reading whether the queue was paused while the listener was not listening failed; its prefetched jobs may start")
}

// givePausedBackIfPaused reads whether the queue is paused, within
// timeout, and gives the prefetched jobs back if it is (givePausedBack).
// A read that fails is logged as failed, and nothing is given back.
func (o *operatorNotes[T]) givePausedBackIfPaused(timeout time.Duration, failed string) {
	r := o.r
	pr, ok := r.store.(pausedReader)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	paused, err := pr.isPaused(ctx)
	cancel()
	if err != nil {
		r.log.Warn(failed, "error", err)
		return
	}
	if paused {
		o.givePausedBack()
	}
}

// givePausedBack gives the prefetched jobs back to the database (pending,
// attempt restored) when an operator paused the queue, so that none of
// them starts until Resume. A claim in flight meanwhile gives its jobs
// back too (see pauses): it may have read the queue before the pause.
// Either way the fetcher then claims once more (reclaimAfterPause).
func (o *operatorNotes[T]) givePausedBack() {
	r := o.r
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.pauses++
	queued := r.takeQueuedLocked()
	r.mu.Unlock()
	r.log.Debug("skipjack: a pause was noted; claims in flight and prefetched jobs go back", "prefetched", len(queued))
	if len(queued) == 0 {
		return
	}
	r.log.Info("skipjack: the queue was paused; giving back the prefetched jobs", "jobs", len(queued))
	signal(r.capacityFreed)
	r.releaser.release(queued)
	r.reclaimAfterPause()
}

// reclaimAfterPause makes the fetcher claim again after jobs went back
// because a pause was noted (givePausedBack, or a claim in flight across
// the note). The note may be stale: a worker that reads the pause state
// once its listener listens (pauseMissed) can act on a pause after the
// Resume that ended it, whose wake-up it has spent already. Nothing else
// would then wake it before its next poll, which may be far off. While
// the queue is paused, the claim this costs takes nothing: claims read
// the pause state themselves.
func (r *runner[T]) reclaimAfterPause() { signal(r.claimable) }

// takeCancelledLocked takes the jobs an operator cancelled out of the
// prefetched queue, as takeQueuedLocked takes them all; r.mu must be held.
func (r *runner[T]) takeCancelledLocked() []*entry[T] {
	var out []*entry[T]
	kept := r.queue[:0]
	for _, e := range r.queue {
		if !e.cancelled {
			kept = append(kept, e)
			continue
		}
		r.inflight--
		if r.prepaid {
			r.budget.Release()
		}
		if !e.lost.Load() {
			e.settling.Store(true)
			out = append(out, e)
		}
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	return out
}

// staleQueuedLocked appends to dst the queued jobs whose cancel state the
// run last read recheckAfter/2 or more before now, and records that it
// reads them now; r.mu must be held. It also records that for the jobs
// already in dst.
func (r *runner[T]) staleQueuedLocked(now time.Time, dst []*entry[T]) []*entry[T] {
	for _, e := range dst {
		e.checkedAt = now
	}
	for _, e := range r.queue {
		if now.Sub(e.checkedAt) >= recheckAfter/2 && !e.lost.Load() {
			e.checkedAt = now
			dst = append(dst, e)
		}
	}
	return dst
}

// pauseGate makes a worker that hears no notifications (PollOnly, notify:
// false) read whether its queue is paused before a prefetched job starts,
// at most once per recheckAfter: Pause cannot tell it to give its
// prefetched jobs back. One read at a time serves every handler; a job
// about to start while it is in flight waits for it. Guarded by the run's
// mu.
type pauseGate struct {
	on      bool          // the run hears no notifications
	readAt  time.Time     // when the last read started
	reading chan struct{} // closed when the read in flight ends; nil when none is
}

// passLocked reports what a job about to start at now must wait for: read
// set when its handler must read the pause state first (readPause), wait
// non-nil when a read in flight must end first; neither when the last
// read is recent enough. r.mu must be held.
func (g *pauseGate) passLocked(now time.Time) (read bool, wait <-chan struct{}) {
	switch {
	case !g.on:
		return false, nil
	case g.reading != nil:
		return false, g.reading
	case now.Sub(g.readAt) < recheckAfter:
		return false, nil
	}
	g.reading = make(chan struct{})
	g.readAt = now
	return true, nil
}

// readPause reads whether the queue is paused, for the handler that
// passLocked told to, and gives the prefetched jobs back if it is (which
// counts a pause: see startChecked). A read that fails lets the jobs
// start, as a failed recheck does.
func (o *operatorNotes[T]) readPause() {
	r := o.r
	o.givePausedBackIfPaused(recheckTimeout, "skipjack: checking whether the queue was paused before prefetched jobs start failed; starting them")
	r.mu.Lock()
	close(r.pauseGate.reading)
	r.pauseGate.reading = nil
	r.mu.Unlock()
}

// recheck reads the cancel state of es, prefetched jobs about to start
// (see pop), and acts on it as the heartbeat does.
func (r *runner[T]) recheck(es []*entry[T]) {
	if err := r.leases.renew(es, recheckTimeout); err != nil {
		r.log.Warn("skipjack: checking prefetched jobs for cancels before they start failed; starting them", "error", err)
	}
}

// startChecked starts e, a job pop took and recheck or the pause gate
// checked: it returns e with its handler's context, or e without one when
// an operator cancelled it, the queue was paused since pop took it (the
// run's count of pauses is no longer pauses) or the worker stopped
// meanwhile (it must not start), or nil when another attempt owns it.
func (r *runner[T]) startChecked(e *entry[T], pauses int) (*entry[T], context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case e.lost.Load():
		r.inflight--
		signal(r.capacityFreed)
		return nil, nil
	case e.cancelled || r.stopped || r.pauses != pauses:
		return e, nil
	}
	return e, r.startLocked(e)
}
