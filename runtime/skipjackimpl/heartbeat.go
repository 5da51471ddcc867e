package skipjackimpl

import (
	"context"
	"fmt"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// Liveness and leases.
//
// A worker proves that it is alive with one row of its own in the schema's
// workers table, renewed every Lease/3 (liveLoop). Rescue takes a job whose
// lease lapsed only from a worker whose row expired or is gone, so locks on
// job rows or on the queue table (a handler's open CompleteTx transaction,
// an operator's SELECT ... FOR UPDATE, a migration) can delay the renewal
// of job leases without ever making a live worker's jobs run again.
//
// The per-job heartbeat (heartbeatLoop) still extends the job leases it
// can (they tell operators and older runtimes which jobs are held), and it
// is how the worker learns that an operator cancelled a job, or that a job
// is no longer its own (it was rescued while this worker could not prove
// it was alive): those handlers are cancelled and their results dropped,
// since the claim token would refuse them anyway.
//
// A finished handler's result is never dropped on doubt: it stays queued
// until a fenced write lands or is refused by the claim token. When the
// worker cannot prove it is alive for Lease - Lease/3 (the database is
// unreachable), it cancels its running handlers with skipjack.ErrLeaseLost
// and gives back its prefetched jobs, since a rescuer may soon take them;
// the results of the cancelled handlers are still written under the fence.

// leases keeps the leases of the jobs a run holds, on two goroutines of
// its own that run starts: heartbeatLoop renews them and acts on what the
// renewal reports (jobs an operator cancelled, jobs another attempt took),
// and watchLoop gives them up when the run cannot prove it is alive
// (doubt) or a handler ignores its context long past the queue's timeout
// (abandonOverruns). The operator loop and the recheck before a start
// call heartbeat and renew; a claim that takes a job this run held calls
// loseLocked. It owns the orphans; the held jobs it works on are the
// run's, under the run's mu.
type leases[T any] struct {
	r *runner[T]
	// orphans are the jobs taken from this run (loseLocked) whose
	// handlers still ran, holding a token of the group's budget; guarded
	// by r.mu. See abandonOverruns.
	orphans []*entry[T]
}

// heartbeatLoop extends the leases of every job the worker holds
// (prefetched, running, or done but not yet acknowledged) with one
// statement every Lease/3, until stop is closed; each time it also retries
// the releases that failed and gives back the jobs running under this
// worker that it does not hold (see giveBackUnheld).
func (l *leases[T]) heartbeatLoop(stop <-chan struct{}) {
	r := l.r
	interval := r.spec.Lease / 3
	tick(stop, interval, func() {
		renewed, held := l.snapshot()
		if err := l.renew(renewed, interval); err != nil {
			r.log.Warn("skipjack: heartbeat failed; job leases are not extended while it fails (the worker's own row proves it alive)", "error", err)
		}
		r.releaser.retry()
		if err := l.giveBackUnheld(held, interval); err != nil {
			r.log.Warn("skipjack: giving back jobs this worker does not hold failed; the next heartbeat tries again", "error", err)
		}
	})
}

// heartbeat runs one heartbeat. Jobs it no longer owns were taken from
// this worker (a rescuer made them pending again while it could not prove
// it was alive): their handlers' contexts are cancelled with
// skipjack.ErrLeaseLost and their results are dropped.
func (l *leases[T]) heartbeat(timeout time.Duration) error {
	es, _ := l.snapshot()
	return l.renew(es, timeout)
}

// snapshot returns, in one walk of the held set under r.mu, the held jobs
// a heartbeat renews (those not lost, whose cancel state it records as
// read now) and the ids of every held job (see giveBackUnheld).
func (l *leases[T]) snapshot() (renewed []*entry[T], held []int64) {
	r := l.r
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	renewed = make([]*entry[T], 0, len(r.held))
	held = make([]int64, 0, len(r.held))
	for id, e := range r.held {
		held = append(held, id)
		// A job CompleteTx acknowledged is renewed too: its row is locked
		// until the caller's transaction ends (reported alive, unrenewed),
		// then gone or completed if it committed (reported not owned, which
		// renew ignores), or running again if it rolled back.
		if !e.lost.Load() {
			e.checkedAt = now
			renewed = append(renewed, e)
		}
	}
	return renewed, held
}

// giveBackUnheld makes pending again the jobs running under this run's
// worker id that it does not hold (held: as of before the statement) and
// whose leases lapsed: a claim the server committed after this worker's
// client had given up on it (its deadline passed, its connection broke)
// left them running under a worker that never read their rows, and since
// this worker keeps proving it is alive, no Rescue takes them. A lapsed
// lease means the claim is at least a lease old, far longer than a claim
// takes to reach the held set once its rows are read, so no job this run
// is about to hold is given back. Queries generated before GiveBack skip
// this.
func (l *leases[T]) giveBackUnheld(held []int64, timeout time.Duration) error {
	r := l.r
	gs, ok := r.store.(giveBackStore)
	if !ok || !gs.givesBack() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	n, err := gs.GiveBack(ctx, r.liveness.id, held, maintainBatch)
	cancel()
	if err != nil {
		return fmt.Errorf("give back unheld jobs of %s: %w", r.spec.Name, err)
	}
	if n > 0 {
		r.log.Warn("skipjack: jobs were running under this worker without it holding them (a claim committed after this worker gave up on it); they are pending again", "jobs", n)
		signal(r.claimable)
	}
	return nil
}

// renew runs one heartbeat statement over es (held jobs, none lost) and
// acts on what it reports: cancels (see cancelJobs) and jobs this run no
// longer owns (except those CompleteTx acknowledged, see below).
func (l *leases[T]) renew(es []*entry[T], timeout time.Duration) error {
	r := l.r
	if len(es) == 0 {
		return nil
	}
	ids, claims := idsAndClaims(es)
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	kept, cancelled, err := r.store.Heartbeat(ctx, ids, claims, r.spec.Lease)
	cancel()
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", r.spec.Name, err)
	}
	if len(cancelled) > 0 {
		l.cancelJobs(cancelled)
	}
	if len(kept) == len(es) {
		return nil
	}
	alive := make(map[int64]bool, len(kept))
	for _, id := range kept {
		alive[id] = true
	}
	lost := 0
	var ends []func()
	r.mu.Lock()
	for _, e := range es {
		if alive[e.row.ID] || e.lost.Load() || e.settling.Load() || r.held[e.row.ID] != e {
			continue // kept, or acknowledged or released meanwhile
		}
		if e.txAcked.Load() {
			continue // CompleteTx may have committed it: the fenced write of its result decides
		}
		ends = append(ends, l.loseLocked(e))
		lost++
	}
	r.mu.Unlock()
	runAll(ends)
	if lost > 0 {
		r.log.Warn("skipjack: jobs were taken from this worker (rescued while it could not prove it was alive); their handlers are cancelled and their results dropped", "jobs", lost)
	}
	return nil
}

// cancelJobs acts on the jobs an operator cancelled: running handlers are
// cancelled with cause skipjack.ErrCancelled (their results then fail the
// jobs: the database does so whatever the handler returns), and prefetched
// jobs are marked so that they never start, and given back at once
// (released, they end failed "cancelled"), which frees their slots.
func (l *leases[T]) cancelJobs(ids []int64) {
	r := l.r
	r.mu.Lock()
	drop := false
	for _, id := range ids {
		e := r.held[id]
		switch {
		case e == nil:
		case e.cancel != nil:
			e.cancel(skipjack.ErrCancelled)
		case e.startedAt.IsZero():
			e.cancelled = true
			drop = true
		}
	}
	var out []*entry[T]
	if drop {
		out = r.takeCancelledLocked()
	}
	r.mu.Unlock()
	if len(out) > 0 {
		signal(r.capacityFreed)
		r.releaser.release(out)
	}
}

// loseLocked marks e as owned by another attempt: e is no longer held, its
// handler's context (if it runs) is cancelled with skipjack.ErrLeaseLost
// and its result will be dropped. r.mu must be held. It returns what ends
// e's isolation if e is a running suspect (see isolate.go), for the caller
// to run once it released r.mu, or a no-op.
func (l *leases[T]) loseLocked(e *entry[T]) func() {
	e.lost.Store(true)
	l.r.forget(e)
	if e.cancel != nil {
		e.cancel(skipjack.ErrLeaseLost)
		if e.token != nil && !e.startedAt.IsZero() {
			// abandonOverruns bounds its token. (A suspect still waiting
			// for isolation stops waiting now, and returns its token.)
			l.orphans = append(l.orphans, e)
		}
	}
	if end := e.endIsolation; end != nil {
		return end
	}
	return func() {}
}

// runAll runs every function of fs.
func runAll(fs []func()) {
	for _, f := range fs {
		f()
	}
}

// watchLoop watches what this worker can still prove, until stop is
// closed: when it cannot prove it is alive (see doubt) and when handlers
// ignore their context long past the queue's timeout (see abandonOverruns).
func (l *leases[T]) watchLoop(stop <-chan struct{}) {
	r := l.r
	interval := r.spec.Lease / 3
	t := time.NewTicker(max(interval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if n := l.doubt(now, r.spec.Lease-interval); n > 0 {
				r.log.Warn("skipjack: cannot prove this worker is alive (its renewals keep failing); running handlers are cancelled and prefetched jobs given back, finished results are still written",
					"jobs", n, "unproven_after", r.spec.Lease-interval)
			}
			if ids := l.abandonOverruns(now, r.spec.Timeout+r.spec.Lease); len(ids) > 0 {
				r.log.Warn("skipjack: handlers ignore their context long past the queue's timeout; their attempts are recorded as failed, so the jobs run again, and their results are dropped",
					"jobs", ids, "timeout", r.spec.Timeout, "abandoned_after", r.spec.Timeout+r.spec.Lease)
			}
		}
	}
}

// doubt acts when this worker has not proven it is alive for more than
// proof: a rescuer may soon take its jobs. It cancels the running handlers
// with skipjack.ErrLeaseLost (once each; their results are still written,
// fenced by the claim token) and gives back the prefetched jobs. It
// returns how many jobs it acted on.
func (l *leases[T]) doubt(now time.Time, proof time.Duration) int {
	r := l.r
	if !r.liveness.doubting(now, proof) {
		return 0
	}
	r.mu.Lock()
	n := 0
	for _, e := range r.held {
		if e.lost.Load() || e.doubted || e.cancel == nil || e.txAcked.Load() {
			continue
		}
		e.doubted = true
		e.cancel(skipjack.ErrLeaseLost)
		n++
	}
	queued := r.takeQueuedLocked()
	r.mu.Unlock()
	if len(queued) > 0 {
		signal(r.capacityFreed)
		r.releaser.release(queued)
	}
	return n + len(queued)
}

// abandonOverruns gives up the jobs whose handlers have been running for
// more than limit (the queue's timeout plus one lease: their contexts were
// cancelled at the timeout, and they ignore it), so that a stuck handler
// holds neither its job, nor its isolation, nor its token of a RunGroup's
// budget forever, and returns their ids. Each attempt is written as failed
// (retried with backoff, or failed for good when it was the last), and the
// handler's own result, should it ever return, is dropped; its slot of the
// worker's own Concurrency stays taken until it returns. A job taken from
// this run while its handler ran (orphans) gives back its budget token at
// the same limit: its handler was cancelled with skipjack.ErrLeaseLost.
func (l *leases[T]) abandonOverruns(now time.Time, limit time.Duration) []int64 {
	r := l.r
	r.mu.Lock()
	var abandoned []*entry[T]
	var ends []func()
	for _, e := range r.held {
		if e.lost.Load() || e.abandoned || e.cancel == nil || e.startedAt.IsZero() || now.Sub(e.startedAt) <= limit {
			continue
		}
		e.abandoned = true
		abandoned = append(abandoned, e)
		if e.endIsolation != nil {
			ends = append(ends, e.endIsolation)
		}
		if e.token != nil {
			ends = append(ends, e.token)
		}
	}
	kept := l.orphans[:0]
	for _, e := range l.orphans {
		switch {
		case e.cancel == nil: // its handler returned, and gave back its token
		case now.Sub(e.startedAt) > limit:
			ends = append(ends, e.token)
		default:
			kept = append(kept, e)
		}
	}
	clear(l.orphans[len(kept):])
	l.orphans = kept
	r.mu.Unlock()
	ids := make([]int64, 0, len(abandoned))
	for _, e := range abandoned {
		ids = append(ids, e.row.ID)
		r.results.add(e, Resolution{
			Action:  ActionRetry,
			Delay:   retryDelay(int(e.row.Attempt), r.spec.BackoffMin, r.spec.BackoffMax),
			Message: fmt.Sprintf("handler ignored its context for %v past its %v timeout; abandoned", now.Sub(e.startedAt)-r.spec.Timeout, r.spec.Timeout),
		}, false, false, now)
	}
	runAll(ends)
	if len(ids) > 0 {
		r.results.flushSoon()
	}
	return ids
}
