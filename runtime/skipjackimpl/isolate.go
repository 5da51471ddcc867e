package skipjackimpl

import (
	"context"
	"sync"
	"time"
)

// Poison-pill isolation.
//
// A job whose handler kills its process (os.Exit, an out-of-memory kill, a
// panic in a goroutine it started) is rescued once its lease lapses, like
// every other job that process held. Counted alike, the jobs that merely
// shared the process with it would fail beside it after enough crashes.
// So a job rescued suspectRescues times or more is a suspect: before its
// handler starts, the workers sharing its pool stop claiming, give back
// the jobs they prefetched, flush their results and let their running
// handlers finish; the suspect then runs alone, and nothing else starts
// until its result is written. Once a job is a suspect, a crash while it
// runs is its own: the rescues that fail it (the sixth, see the queue's
// Rescue query) are crashes of runs in isolation, and a job that only
// shared a process with it collects at most suspectRescues-1 rescues from
// it.

const (
	// suspectRescues is the rescue count from which a claimed job runs
	// alone. One rescue is what every job in flight gets when a process
	// dies once (a deploy's SIGKILL, an OOM kill of a neighbour), which
	// should not slow the recovery; a job whose workers died twice while
	// it ran is worth a drained process.
	suspectRescues = 2
	// isolationWait bounds how long a suspect waits for the other jobs of
	// its pool to settle. Past it (handlers that run for minutes), the
	// suspect runs beside what is left, and the worker logs it.
	isolationWait = 30 * time.Second
	// isolationPoll is how often a waiting suspect looks again when
	// nothing nudged it (owner.nudge): a backstop, since the pool's
	// handlers and runs nudge it as they let go of jobs.
	isolationPoll = 100 * time.Millisecond
)

// isolating reports whether a suspect waits or runs, so that no worker of
// the pool claims meanwhile.
func (o *owner) isolating() bool { return o.active.Load() }

// enter admits an ordinary handler, unless a suspect isolates the pool;
// every admitted handler calls exit when it returns.
func (o *owner) enter() bool {
	// Paired with isolate's store and load: either this load sees the
	// suspect, or the suspect sees this handler running.
	o.running.Add(1)
	if o.active.Load() {
		o.exit()
		return false
	}
	return true
}

// exit records that an ordinary handler returned.
func (o *owner) exit() {
	o.running.Add(-1)
	o.nudge()
}

// nudge wakes a waiting suspect, if any, to look at the pool again: a
// handler returned or a run let go of a job.
func (o *owner) nudge() {
	if o.active.Load() {
		signal(o.changed)
	}
}

// isolate takes the pool for the suspect that self holds: it returns
// false at once when another suspect has it. Otherwise it makes every
// worker shed its prefetched jobs, then waits until no ordinary handler
// runs and no worker holds a job but self's suspect, or ctxDone or stop is
// closed (then it returns false), or isolationWait has passed; alone
// reports whether the pool settled. After true, the caller calls
// endIsolation when the suspect's result is written. The workers shed on
// goroutines of their own, which end before isolate returns.
func (o *owner) isolate(self member, ctxDone, stop <-chan struct{}) (ok, alone bool) {
	if !o.active.CompareAndSwap(false, true) {
		return false, false
	}
	var shedding sync.WaitGroup
	defer shedding.Wait()
	for _, m := range o.members() {
		shedding.Go(m.shed)
	}
	deadline := time.NewTimer(isolationWait)
	defer deadline.Stop()
	t := time.NewTicker(isolationPoll)
	defer t.Stop()
	for !o.settled(self) {
		select {
		case <-deadline.C:
			return true, false
		case <-ctxDone:
			o.endIsolation()
			return false, false
		case <-stop:
			o.endIsolation()
			return false, false
		case <-o.changed:
		case <-t.C:
		}
	}
	return true, true
}

// settled reports whether no ordinary handler runs and the members hold
// nothing but self's suspect.
func (o *owner) settled(self member) bool {
	if o.running.Load() != 0 {
		return false
	}
	for _, m := range o.members() {
		want := 0
		if m == self {
			want = 1
		}
		if m.holding() > want {
			return false
		}
	}
	return true
}

// endIsolation ends isolation and wakes every worker's claimer.
func (o *owner) endIsolation() {
	o.active.Store(false)
	for _, m := range o.members() {
		m.resume()
	}
}

// admit runs e's handler when its pool lets it. An ordinary job runs at
// once unless a suspect isolates the pool, in which case it is given back
// (pending again, attempt restored) for a worker to claim later. A suspect
// runs alone (see the top of this file).
func (r *runner[T]) admit(ctx context.Context, e *entry[T]) {
	if e.row.Rescues < suspectRescues {
		if !r.owner.enter() {
			r.giveBack(e)
			return
		}
		defer r.owner.exit()
		r.execute(ctx, e) // pop recorded it as started
		return
	}
	// It stops waiting when its lease is lost, the job is cancelled or
	// shutdown's deadline passes (ctx), or when the worker stops starting
	// jobs (stopHandlers).
	ok, alone := r.owner.isolate(r, ctx.Done(), r.stopHandlers)
	if !ok {
		r.giveBack(e)
		return
	}
	// Isolation ends when the suspect's attempt ends in any way: its
	// result is written (below), or the worker abandons its handler past
	// the queue's timeout, or another attempt takes the job. Whichever
	// comes first ends it; a handler that never returns cannot keep the
	// pool's workers from claiming.
	end := sync.OnceFunc(r.owner.endIsolation)
	r.mu.Lock()
	e.endIsolation = end
	e.settled = make(chan struct{})
	gone := e.lost.Load() || e.abandoned
	r.mu.Unlock()
	defer end()
	if gone {
		r.giveBack(e) // dropped: another attempt owns it
		return
	}
	if alone {
		r.log.Info("skipjack: running a suspect job alone (its lease lapsed before, as if its handler killed the process)",
			"job_id", e.row.ID, "rescues", e.row.Rescues)
	} else {
		r.log.Warn("skipjack: running a suspect job beside other jobs: they did not settle in time",
			"job_id", e.row.ID, "rescues", e.row.Rescues, "waited", isolationWait)
	}
	r.mu.Lock()
	r.timeouts.startLocked(e)
	r.mu.Unlock()
	r.execute(ctx, e)
	r.awaitSettled(e)
}

// giveBack releases a popped job whose handler did not start: it is
// pending again with its attempt and rescues as they were (dropped if its
// lease was lost meanwhile).
func (r *runner[T]) giveBack(e *entry[T]) {
	e.cancel(nil)
	r.finish(e, Resolution{ID: e.row.ID, Claim: e.row.Claim, Action: ActionRelease}, false)
}

// awaitSettled waits until e's result is written (or dropped), at most a
// statement's deadline after the acknowledgement delay.
func (r *runner[T]) awaitSettled(e *entry[T]) {
	r.results.flushSoon()
	t := time.NewTimer(r.cfg.AckDelay + r.stmtTimeout)
	defer t.Stop()
	select {
	case <-e.settled:
	case <-t.C:
	}
}

// shed gives back the prefetched jobs and flushes the results now, for a
// suspect that waits to run alone.
func (r *runner[T]) shed() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	out := r.takeQueuedLocked()
	r.mu.Unlock()
	r.results.flushSoon()
	r.releaser.release(out)
}

// holding returns how many jobs the worker holds.
func (r *runner[T]) holding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// resume wakes the claimer after isolation ended.
func (r *runner[T]) resume() { signal(r.claimable) }

// ackInTx records that CompleteTx acknowledged job (id id) if this run
// holds it, and reports whether it does.
func (r *runner[T]) ackInTx(id int64, job any) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.held[id]
	if e == nil || any(e.job) != job {
		return false
	}
	e.txAcked.Store(true)
	return true
}
