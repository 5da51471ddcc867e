package skipjackimpl

import (
	"context"
	"fmt"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"time"
)

// heartbeatLoop extends the leases of every job the worker holds
// (prefetched, running, or done but not yet acknowledged) with one
// statement every Lease/3, until stop is closed.
func (r *runner[T]) heartbeatLoop(stop <-chan struct{}) {
	interval := r.spec.Lease / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if err := r.heartbeat(interval); err != nil {
			r.log.Warn("skipjack: heartbeat failed; leases lapse if it keeps failing", "error", err)
		}
	}
}

// heartbeat runs one heartbeat. Jobs it no longer owns lost their lease
// (another worker's rescuer took them back): their handlers' contexts are
// cancelled with skipjack.ErrLeaseLost and their results are dropped.
func (r *runner[T]) heartbeat(timeout time.Duration) error {
	r.mu.Lock()
	es := make([]*entry[T], 0, len(r.held))
	for _, e := range r.held {
		// A job CompleteTx acknowledged is settled by the caller's
		// transaction: its row is locked (or gone) until that commits or
		// rolls back, so there is nothing to renew.
		if !e.lost && !ackedInTx(e.job, false) {
			es = append(es, e)
		}
	}
	r.mu.Unlock()
	if len(es) == 0 {
		return nil
	}

	ids, claims := idsAndClaims(es)
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	start := time.Now()
	kept, cancelled, err := r.store.Heartbeat(ctx, ids, claims, r.spec.Lease)
	cancel()
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", r.spec.Name, err)
	}
	r.renewed(es, kept, start)
	if len(cancelled) > 0 {
		r.cancelJobs(cancelled)
	}
	if len(kept) == len(es) {
		return nil
	}
	alive := make(map[int64]bool, len(kept))
	for _, id := range kept {
		alive[id] = true
	}
	lost := 0
	r.mu.Lock()
	for _, e := range es {
		if alive[e.row.ID] || e.lost || e.settling || r.held[e.row.ID] != e {
			continue // kept, or acknowledged or released meanwhile
		}
		if ackedInTx(e.job, false) {
			continue // acknowledged by CompleteTx meanwhile
		}
		r.loseLocked(e)
		lost++
	}
	r.mu.Unlock()
	if lost > 0 {
		r.log.Warn("skipjack: lost the lease of jobs; their handlers are cancelled and their results dropped", "jobs", lost)
	}
	return nil
}

// cancelJobs cancels the handlers of jobs an operator cancelled, with cause
// skipjack.ErrCancelled; their results then fail them (the database does so
// whatever the handler returns).
func (r *runner[T]) cancelJobs(ids []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if e := r.held[id]; e != nil && e.cancel != nil {
			e.cancel(skipjack.ErrCancelled)
		}
	}
}

// renewed records that the heartbeat that started at start extended the
// leases of the jobs among es whose ids are in kept.
func (r *runner[T]) renewed(es []*entry[T], kept []int64, start time.Time) {
	alive := make(map[int64]bool, len(kept))
	for _, id := range kept {
		alive[id] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range es {
		if alive[e.row.ID] {
			e.renewedAt = start
		}
	}
}

// loseLocked marks e's lease as lost: e is no longer held, its handler's
// context (if it runs) is cancelled with skipjack.ErrLeaseLost and its
// result will be dropped. r.mu must be held.
func (r *runner[T]) loseLocked(e *entry[T]) {
	e.lost = true
	r.forget(e)
	if e.cancel != nil {
		e.cancel(skipjack.ErrLeaseLost)
	}
}

// leaseWatchLoop gives up the jobs whose leases this worker can no longer
// prove, until stop is closed. A lease is proven until Lease after the
// start of the last claim or heartbeat that extended it; once that is
// less than one heartbeat interval away (heartbeats keep failing: a
// partition, a database that is down), the job's handler is cancelled
// with skipjack.ErrLeaseLost, ahead of any rescuer that may give the job
// to another worker, and its result is dropped.
func (r *runner[T]) leaseWatchLoop(stop <-chan struct{}) {
	interval := r.spec.Lease / 3
	t := time.NewTicker(max(interval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if n := r.expireUnproven(now, r.spec.Lease-interval); n > 0 {
				r.log.Warn("skipjack: cannot prove the leases of jobs (heartbeats keep failing); their handlers are cancelled and their results dropped",
					"jobs", n, "unproven_after", r.spec.Lease-interval)
			}
			if ids := r.abandonOverruns(now, r.spec.Timeout+r.spec.Lease); len(ids) > 0 {
				r.log.Warn("skipjack: handlers ignore their context long past the queue's timeout; their leases are no longer renewed, so the jobs run again elsewhere, and their results are dropped",
					"jobs", ids, "timeout", r.spec.Timeout, "abandoned_after", r.spec.Timeout+r.spec.Lease)
			}
		}
	}
}

// expireUnproven loses every held job whose lease was last extended more
// than proof ago, except those being settled by a statement now or
// acknowledged by CompleteTx, and returns how many it lost.
func (r *runner[T]) expireUnproven(now time.Time, proof time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.held {
		if e.lost || e.settling || now.Sub(e.renewedAt) <= proof || ackedInTx(e.job, false) {
			continue
		}
		r.loseLocked(e)
		n++
	}
	return n
}

// abandonOverruns gives up the jobs whose handlers have been running for
// more than limit (the queue's timeout plus one lease: their contexts were
// cancelled at the timeout, and they ignore it), so that a stuck handler
// is not heartbeated forever, and returns their ids. Their slots stay
// taken until the handlers return.
func (r *runner[T]) abandonOverruns(now time.Time, limit time.Duration) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for id, e := range r.held {
		if e.lost || e.cancel == nil || e.startedAt.IsZero() || now.Sub(e.startedAt) <= limit || ackedInTx(e.job, false) {
			continue
		}
		r.loseLocked(e)
		ids = append(ids, id)
	}
	return ids
}
