package skipjackimpl

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	// isolationPoll is how often a waiting suspect looks again.
	isolationPoll = 5 * time.Millisecond
)

// member is a running worker, as the isolation of its pool sees it.
type member interface {
	// shed gives back the jobs the worker prefetched and flushes its
	// results now.
	shed()
	// holding returns how many jobs the worker holds: claimed and not yet
	// settled by a written result or a release.
	holding() int
	// resume wakes the worker's claimer once isolation ends.
	resume()
}

// isolation is the state of suspect jobs for the workers of one pool.
type isolation struct {
	active  atomic.Bool  // a suspect waits for the pool's workers to settle, or runs
	running atomic.Int64 // ordinary handlers running
	users   int          // workers joined; guarded by isolations.mu
	mu      sync.Mutex
	members map[member]struct{}
}

// isolations holds the isolation of each pool with running workers.
var isolations = struct {
	mu sync.Mutex
	m  map[*pgxpool.Pool]*isolation
}{m: make(map[*pgxpool.Pool]*isolation)}

// joinIsolation adds m to the isolation of pool and returns it with the
// function that removes m again.
func joinIsolation(pool *pgxpool.Pool, m member) (*isolation, func()) {
	isolations.mu.Lock()
	iso := isolations.m[pool]
	if iso == nil {
		iso = &isolation{members: make(map[member]struct{})}
		isolations.m[pool] = iso
	}
	iso.users++
	isolations.mu.Unlock()

	iso.mu.Lock()
	iso.members[m] = struct{}{}
	iso.mu.Unlock()
	return iso, func() {
		iso.mu.Lock()
		delete(iso.members, m)
		iso.mu.Unlock()
		isolations.mu.Lock()
		iso.users--
		if iso.users == 0 {
			delete(isolations.m, pool)
		}
		isolations.mu.Unlock()
	}
}

// isolating reports whether a suspect waits or runs, so that no worker of
// the pool claims meanwhile.
func (iso *isolation) isolating() bool { return iso.active.Load() }

// enter admits an ordinary handler, unless a suspect isolates the pool;
// every admitted handler calls exit when it returns.
func (iso *isolation) enter() bool {
	// Paired with isolate's store and load: either this load sees the
	// suspect, or the suspect sees this handler running.
	iso.running.Add(1)
	if iso.active.Load() {
		iso.exit()
		return false
	}
	return true
}

// exit records that an ordinary handler returned.
func (iso *isolation) exit() { iso.running.Add(-1) }

// isolate takes the pool for the suspect that self holds: it returns
// false at once when another suspect has it. Otherwise it makes every
// worker shed its prefetched jobs, then waits until no ordinary handler
// runs and no worker holds a job but self's suspect, or ctxDone or stop is
// closed (then it returns false), or isolationWait has passed; alone reports whether the pool settled.
// After true, the caller calls release when the suspect's result is
// written.
func (iso *isolation) isolate(self member, ctxDone, stop <-chan struct{}) (ok, alone bool) {
	if !iso.active.CompareAndSwap(false, true) {
		return false, false
	}
	iso.mu.Lock()
	members := make([]member, 0, len(iso.members))
	for m := range iso.members {
		members = append(members, m)
	}
	iso.mu.Unlock()
	for _, m := range members {
		go m.shed()
	}
	deadline := time.Now().Add(isolationWait)
	t := time.NewTicker(isolationPoll)
	defer t.Stop()
	for !iso.settled(self) {
		if time.Now().After(deadline) {
			return true, false
		}
		select {
		case <-ctxDone:
			iso.release()
			return false, false
		case <-stop:
			iso.release()
			return false, false
		case <-t.C:
		}
	}
	return true, true
}

// settled reports whether no ordinary handler runs and the members hold
// nothing but self's suspect.
func (iso *isolation) settled(self member) bool {
	if iso.running.Load() != 0 {
		return false
	}
	iso.mu.Lock()
	defer iso.mu.Unlock()
	for m := range iso.members {
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

// release ends isolation and wakes every worker's claimer.
func (iso *isolation) release() {
	iso.active.Store(false)
	iso.mu.Lock()
	defer iso.mu.Unlock()
	for m := range iso.members {
		m.resume()
	}
}

// admit runs e's handler when its pool lets it. An ordinary job runs at
// once unless a suspect isolates the pool, in which case it is given back
// (pending again, attempt restored) for a worker to claim later. A suspect
// runs alone (see isolation).
func (r *runner[T]) admit(ctx context.Context, e *entry[T]) {
	if e.row.Rescues < suspectRescues {
		if !r.iso.enter() {
			r.giveBack(e)
			return
		}
		defer r.iso.exit()
		r.execute(ctx, e) // pop recorded it as started
		return
	}
	// It stops waiting when its lease is lost, the job is cancelled or
	// shutdown's deadline passes (ctx), or when the worker stops starting
	// jobs (stopHandlers).
	ok, alone := r.iso.isolate(r, ctx.Done(), r.stopHandlers)
	if !ok {
		r.giveBack(e)
		return
	}
	// Isolation ends when the suspect's attempt ends in any way: its
	// result is written (below), or the worker abandons its handler past
	// the queue's timeout, or another attempt takes the job. Whichever
	// comes first ends it; a handler that never returns cannot keep the
	// pool's workers from claiming.
	end := sync.OnceFunc(r.iso.release)
	r.mu.Lock()
	e.endIsolation = end
	gone := e.lost || e.abandoned
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
	r.started(e)
	r.execute(ctx, e)
	r.awaitSettled(e)
}

// started records that e's handler starts now.
func (r *runner[T]) started(e *entry[T]) {
	r.mu.Lock()
	r.startedLocked(e)
	r.mu.Unlock()
}

// startedLocked records that e's handler starts now; r.mu must be held.
func (r *runner[T]) startedLocked(e *entry[T]) {
	e.startedAt = time.Now()
	if r.timeouts != nil {
		r.startTimeoutLocked(e)
	}
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
	signal(r.kick)
	deadline := time.Now().Add(r.cfg.AckDelay + r.stmtTimeout)
	t := time.NewTicker(isolationPoll)
	defer t.Stop()
	for time.Now().Before(deadline) {
		r.mu.Lock()
		held := r.held[e.row.ID] == e
		r.mu.Unlock()
		if !held {
			return
		}
		<-t.C
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
	signal(r.kick)
	r.releaseQueued(out)
}

// holding returns how many jobs the worker holds.
func (r *runner[T]) holding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// resume wakes the claimer after isolation ended.
func (r *runner[T]) resume() { signal(r.poke) }
