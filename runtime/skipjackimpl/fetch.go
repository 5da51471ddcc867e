package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// maxClaimsInFlight is how many claim statements a worker runs at once
// while it claims alone. Every claim is a commit, and commits wait for the
// WAL flush; two claims in flight share flushes (group commit) and keep
// handlers fed while one waits.
const maxClaimsInFlight = 2

// crowdWindow is how many of a worker's last claims tell whether other
// claimers work its queue (see crowd). While they do, one claim runs at a
// time, taking all free capacity, because claimers of one queue pay for
// each other: a claim walks past every row the others locked, and past the
// index entries of rows they claimed while its statement ran (their old
// versions stay visible to its snapshot, so each costs a lock attempt that
// follows the update chain and a recheck). The cost of a claim grows with
// the claims in flight on the queue, across all processes; with several
// processes claiming, the group commit that a second claim in flight buys
// happens across processes anyway. Workers that claim at least
// turnMinClaim jobs at a time also take turns with the other processes'
// claims (see claimBatch), so that they walk past none of them.
const crowdWindow = 4

// turnMinClaim is the smallest BatchSize whose claims take turns while the
// worker is crowded. A turn lasts until the claim's commit is flushed, so
// claims that take turns cannot share WAL flushes, and a saturated server
// slows every turn down for all who wait; a claim is worth that wait only
// when it is large enough that walking past the others' equally large
// claims costs more. Measured on 2 cores at 8 processes (BENCHMARKS.md,
// issue 28):
// claims of about 2,000 jobs take 20-35% less Postgres CPU per job and run
// faster in turns, claims of about 120 jobs run slower.
const turnMinClaim = 500

// turnMinCrowd is the smallest crowd (claimers of the queue, as the spread
// of a worker's last claims counts them, see crowd.claimers) in which
// claims smaller than turnMinClaim take turns too. Small claims that walk
// past each other cost little while the claimers are few, and a turn's
// wait (no shared WAL flushes) would cost more than the walk saves; beyond
// a handful, every claim walks past the rows all the others hold locked,
// so its work grows with the processes. At WorkerConfig{} (claims of about
// 150 jobs), claim buffers per claimed row at 2, 4, 8 and 16 processes
// were 13.0, 14.6, 19.0 and 31 without turns, and 12.9, 14.6, 13.7 and 15
// with them from this crowd on (issue 43, BENCHMARKS.md).
const turnMinCrowd = 6

// turnWait is how long a claim waits for its turn, given the deadline of
// its statement: a quarter of it, at most maxTurnWait. Longer waits than
// that mean a claim holding the turn is stuck (see claimBatch); the worker
// then claims without turns for turnPause.
func turnWait(stmtTimeout time.Duration) time.Duration {
	return min(maxTurnWait, stmtTimeout/4)
}

// clientStallLimit is how long the server waits on the client of a claim
// before it ends the session: silent inside the claim's transaction
// (idle_in_transaction_session_timeout, for a queue with limits or a
// serial key, whose claim takes several statements) or not reading the
// claimed rows (tcp_user_timeout, for every claim). It is turnWait, for
// the same reason. A healthy client sends its next statement and reads
// its rows at once; one that stopped (a frozen process, a paused VM)
// keeps its connection healthy, so nothing else would end a transaction
// that holds the queue's lock, or the locks of jobs no one else may
// claim, for as long as it stays stopped. Both settings last until the
// claim's transaction ends.
func clientStallLimit(stmtTimeout time.Duration) time.Duration {
	return turnWait(stmtTimeout)
}

// millis formats d as a Postgres duration setting in whole milliseconds,
// at least 1 (0 would turn a timeout off).
func millis(d time.Duration) string {
	return fmt.Sprintf("%dms", max(d.Milliseconds(), 1))
}

// maxTurnWait bounds turnWait. In turn, each claim waits for the claims of
// the processes ahead of it: at 16 processes claiming 2,000 jobs each on 2
// cores, up to 15 claims of 30-50 ms each.
const maxTurnWait = 2 * time.Second

// turnPause is how long a worker claims without turns after a wait for its
// turn timed out, so that a stuck turn costs each claimer one turnWait per
// turnPause rather than one per claim.
const turnPause = 15 * time.Second

// crowd remembers the ids of a worker's last claims. A worker that claims
// a queue alone takes every due job in id order, so its last claims
// together cover a range of ids about as large as the jobs they took, in
// whatever order they came back; when other processes claim too, their
// chunks lie between this worker's and the range is larger: nearly twice
// as large beside one other process that claims as much (its chunks
// alternate with this worker's), several times larger beside more. (Jobs
// that were not due, or retried jobs claimed again, widen it too: at worst
// the worker then runs one claim at a time for a while.)
type crowd struct {
	last [crowdWindow]claimResult
	next int
}

// add records a claim that took jobs and reports whether the last claims
// show other claimers: they took less than three quarters of the ids they
// span. Half would miss a second process, whose claims walk past this
// worker's as surely as more processes' do: beside it, the last claims
// take about half of the ids they span, or two thirds at some claims while
// only one of the two keeps two claims in flight. Once crowded, a worker
// runs one claim at a time, so their chunks alternate and it stays so.
func (c *crowd) add(res claimResult) bool {
	c.last[c.next%crowdWindow] = res
	c.next++
	_, taken, lo, hi := c.window()
	return 4*taken < 3*(hi-lo+1)
}

// window returns how many claims the window holds, how many ids they took,
// and the lowest and highest of those ids.
func (c *crowd) window() (n int, taken, lo, hi int64) {
	n = min(c.next, crowdWindow)
	for i, r := range c.last[:n] {
		taken += int64(r.n)
		if i == 0 || r.minID < lo {
			lo = r.minID
		}
		hi = max(hi, r.maxID)
	}
	return n, taken, lo, hi
}

// full reports whether crowdWindow claims have been recorded.
func (c *crowd) full() bool { return c.next >= crowdWindow }

// claimers estimates how many claimers work the queue, this worker
// included, from the ids its last claims span but did not take: beside k
// others that claim as much, k chunks of theirs lie between each two of
// its n claims, so the n claims span n + (n-1)k chunks. Jobs not due, and
// others that claim more or less, make it an estimate; turnMinCrowd is far
// from 1 and 2.
func (c *crowd) claimers() int {
	n, taken, lo, hi := c.window()
	if n < 2 || taken == 0 {
		return 1
	}
	others := float64(hi-lo+1-taken) / float64(taken) * float64(n) / float64(n-1)
	return 1 + int(others+0.5)
}

// takeTurns reports whether the claims of a crowded worker that claims up
// to batchSize jobs at a time take turns with other processes' claims:
// large claims always, small ones once a full window shows a crowd of
// turnMinCrowd claimers or more.
func (c *crowd) takeTurns(batchSize int) bool {
	return batchSize >= turnMinClaim || c.full() && c.claimers() >= turnMinCrowd
}

// claimResult is what one claim statement did.
type claimResult struct {
	limit, n     int
	minID, maxID int64         // the ids the claim took (when n > 0)
	turnWaited   bool          // its wait for a turn timed out (it then claimed without one)
	sweep        bool          // it read the whole claim index (see claimFloor)
	took         time.Duration // from before its statement to its rows (see claimGap)
	err          error
}

// fetchLoop claims jobs until ctx is cancelled. Claims still in flight
// then release what they claimed themselves; r.claims waits for them.
//
// It claims when it has reason to believe jobs are due (at start, after a
// notification, a poll tick or a rescue, when a job it retried or snoozed
// becomes due, and right after a claim that filled its limit) and capacity
// is free. Capacity is Concurrency running plus Concurrency prefetched;
// while the worker is busy it waits until half a batch is free, so claims
// stay batched. It also pauses while too many results wait to be flushed.
func (r *runner[T]) fetchLoop(ctx context.Context) {
	more := true
	// lastFull: the last claim filled its limit, so jobs are likely
	// waiting and a second claim may run beside the next one. After a
	// short claim (an idle queue), a poll tick or a wake-up sends one
	// claim, not one per free batch.
	lastFull := false
	var pollAt time.Time
	// wantAt is the earliest due time noteDue asked for, kept until the
	// poll fires at or after it, so that no later reset of the poll timer
	// (after a claim's result, say) can push the claim it asked for back
	// by a whole PollInterval.
	var wantAt time.Time
	poll := time.NewTimer(0)
	defer poll.Stop()
	resetPoll := func(d time.Duration) {
		if !wantAt.IsZero() {
			d = min(d, max(time.Until(wantAt), 0))
		}
		poll.Reset(d)
		pollAt = time.Now().Add(d)
	}
	resetPoll(jitter(r.cfg.PollInterval))
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backingOff := false
	bo := loopBackoff{max: dbRetryMax}
	// Buffered for every claim in flight, so none blocks on its result.
	results := make(chan claimResult, maxClaimsInFlight)
	inFlight := 0
	// Whether other claimers work this queue (see crowd): then one claim
	// runs at a time. A worker assumes it has company until its first
	// crowdWindow claims show otherwise: workers that start together, as
	// after a deploy or an outage, meet a backlog all at once, which is
	// when their claims would walk past each other the most.
	var ids crowd
	crowded := true
	var turnsOffUntil time.Time // see turnPause
	// While the horizon looks pinned, a claim after a short one waits
	// after the last was sent, longer the longer the last claim took
	// (see claimGap).
	var lastSent time.Time
	var lastTook time.Duration // of the last claim that was not a sweep
	gap := time.NewTimer(time.Hour)
	gap.Stop()
	defer gap.Stop()

	for ctx.Err() == nil {
		// A crowded worker's one claim at a time does not count a sweep:
		// a sweep claims one job, and under a pinned horizon it walks
		// every dead entry of the claim index for as long as a second,
		// which would stall every pickup of the worker meanwhile.
		ready := more && !backingOff && inFlight < maxClaimsInFlight && (!crowded || inFlight == int(r.sweeps.Load()))
		if ready && !lastFull {
			if wait := time.Until(lastSent.Add(r.claimer.floor.claimGap(lastTook))); wait > 0 {
				gap.Reset(wait)
				ready = false
			}
		}
		if ready {
			if limit := r.reserve(); limit > 0 {
				inFlight++
				lastSent = time.Now()
				if !lastFull {
					more = false
				}
				inTurn := crowded && ids.takeTurns(r.cfg.BatchSize) && !time.Now().Before(turnsOffUntil)
				r.claims.Go(func() {
					results <- r.claim(limit, inTurn, ctx.Done())
				})
				continue
			}
		}
		if due := r.due.take(); !due.IsZero() && (wantAt.IsZero() || due.Before(wantAt)) {
			wantAt = due
			if due.Before(pollAt) {
				resetPoll(time.Until(due))
			}
		}
		select {
		case <-ctx.Done():
			return
		case res := <-results:
			inFlight--
			if res.turnWaited {
				turnsOffUntil = time.Now().Add(turnPause)
			}
			if res.err != nil {
				d := bo.next()
				r.log.Warn("skipjack: claim failed; retrying", "error", res.err, "retry_in", d)
				retry.Reset(d)
				backingOff = true
				more = true // claim again once the backoff is over
				continue
			}
			bo.reset()
			if !res.sweep {
				// A sweep takes what its worker's floored claims passed
				// over, out of their order: its ids tell nothing of
				// others, and its duration nothing of a floored claim's.
				lastTook = res.took
				if res.n > 0 {
					if c := ids.add(res); ids.full() {
						crowded = c
					}
				}
			}
			lastFull = res.n == res.limit
			more = more || lastFull
			resetPoll(jitter(r.cfg.PollInterval))
		case <-r.wake:
			more = true
		case <-r.claimable:
			more = true
		case <-poll.C:
			more = true
			if !wantAt.After(time.Now()) {
				wantAt = time.Time{}
			}
			resetPoll(jitter(r.cfg.PollInterval))
		case <-r.capacityFreed:
		case <-gap.C:
		case <-retry.C:
			backingOff = false
		}
	}
}

// noteDue records that a job becomes due after d, so that the fetcher
// polls then instead of waiting for its next PollInterval tick (no
// notification is sent for retries and snoozes).
func (r *runner[T]) noteDue(d time.Duration) {
	t := time.Now().Add(d)
	r.due.note(t)
	signal(r.capacityFreed)
}

// earliest is the earliest of the times noted since it was last taken.
type earliest struct {
	mu sync.Mutex
	t  time.Time
}

// note records t, unless an earlier time is noted.
func (e *earliest) note(t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t.IsZero() || t.Before(e.t) {
		e.t = t
	}
}

// take returns and clears the earliest time noted, or the zero time.
func (e *earliest) take() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.t
	e.t = time.Time{}
	return t
}

// reserve returns how many jobs the next claim may take and reserves that
// capacity for it, or returns 0 when the claim should wait.
func (r *runner[T]) reserve() int {
	if r.results.backlog() >= r.backlogLimit || r.owner.isolating() {
		return 0
	}
	if r.liveness.doubting(time.Now(), r.spec.Lease-r.spec.Lease/3) {
		return 0 // jobs claimed now would be given back at once
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	free := r.heldCap.capLocked(time.Now()) - r.inflight
	limit := min(free, r.cfg.BatchSize)
	if limit <= 0 || (limit < r.minClaim && r.inflight > 0) {
		return 0
	}
	r.inflight += limit
	r.asked += limit
	return limit
}

// claim runs one claim statement with capacity for limit jobs reserved,
// queues what it returns and gives back the unused capacity. The statement
// is not cancelled by shutdown (it is short and bounded): when the worker
// stopped meanwhile, the jobs it claimed are released at once instead of
// lingering until their leases lapse. It returns how many jobs it took
// and the lowest and highest of their ids (fetchLoop tells from them
// whether other processes claim the queue too). With inTurn, the claim
// takes turns with the other processes' claims (see claimBatch).
//
// A prepaid claim first waits for at least one of its group's budget
// tokens, and for as many as are free up to limit, and claims only that
// many jobs; it gives back the tokens it did not use, and returns nothing
// when stop is closed while it waits.
func (r *runner[T]) claim(limit int, inTurn bool, stop <-chan struct{}) claimResult {
	reserved := limit
	if r.prepaid {
		if limit = r.budget.AcquireUpTo(r.member, reserved, stop); limit == 0 {
			r.mu.Lock()
			r.asked -= reserved
			r.inflight -= reserved
			r.mu.Unlock()
			return claimResult{limit: reserved}
		}
	}
	r.mu.Lock()
	pauses := r.pauses
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), r.stmtTimeout)
	start := time.Now()
	plan := r.claimer.floor.plan(start, limit)
	if plan.sweep {
		r.sweeps.Add(1)
		defer r.sweeps.Add(-1)
		if spare := limit - plan.limit; spare > 0 {
			// A sweep claims at most sweepLimit jobs: the capacity it
			// reserved beyond them is free at once for the claims beside
			// it, rather than for as long as it walks.
			r.mu.Lock()
			r.asked -= spare
			r.inflight -= spare
			r.mu.Unlock()
			if r.prepaid {
				r.budget.ReleaseN(spare)
			}
			reserved -= spare
			limit = plan.limit
			signal(r.capacityFreed)
		}
	}
	rows, at, short, err := r.claimer.claimRows(ctx, r.claimBufs.take(), plan, inTurn)
	turnWaited := inTurn && errors.Is(err, errTurnWaited)
	if turnWaited {
		r.log.Warn("skipjack: a claim waited too long for its turn; claiming without turns for a while (pg_locks shows who holds the advisory lock)",
			"error", err, "without_turns_for", turnPause)
		rows, at, short, err = r.claimer.claimRows(ctx, rows[:0], plan, false)
	}
	took := time.Since(start)
	if err == nil {
		r.claimer.floor.claimed(plan, rows, at)
	}
	if plan.sweep {
		r.claimer.floor.swept(took)
	}
	if err != nil && r.spec.Serial && sqlState(err) == "23505" {
		// The unique index of running serial keys refused the claim: a
		// job of one of its keys was claimed (or made running) by a
		// transaction that committed after this claim's snapshot. Nothing
		// was claimed; the next claim sees that job and skips its key.
		r.log.Debug("skipjack: a claim raced another for a serial key; claiming again", "error", err)
		rows, err = rows[:0], nil
		r.noteDue(min(limitPoll, r.cfg.PollInterval))
	}
	if short != nil {
		if short.Due {
			r.heldCap.noteBinding(time.Now())
		}
		if d, ok := headroomWait(*short, r.spec, r.cfg.PollInterval); ok {
			r.noteDue(d)
		}
	}
	cancel()
	if err != nil {
		rows = rows[:0]
		err = fmt.Errorf("claim %s: %w", r.spec.Name, err)
	}
	defer r.claimBufs.keep(rows)
	r.hooks.claimDone(limit, len(rows), took, err)
	// Payloads are decoded here, on one goroutine whose stack has grown
	// once, rather than on the handler goroutines, which start with
	// small stacks.
	entries := make([]entry[T], len(rows))
	for i := range rows {
		e := &entries[i]
		e.row = rows[i]
		e.checkedAt = start
		newJob(e)
		e.decodeErr = decode(r.log, e.row.Payload, &e.job.Payload)
	}
	if wt := r.spec.Workflow; wt != nil && len(entries) > 0 && err == nil {
		// A job that cannot learn its workflow goes back at once, as
		// those of a stopped worker do.
		if err = r.workflow.setIDs(entries); err != nil {
			err = fmt.Errorf("claim %s: %w", r.spec.Name, err)
		}
	}
	r.mu.Lock()
	r.asked -= reserved
	if paused := !r.stopped && r.pauses != pauses; r.stopped || paused || (err != nil && len(entries) > 0) {
		// Stopped, or paused (the claim may have read the queue before
		// the pause): the jobs go back at once.
		r.inflight -= reserved
		r.mu.Unlock()
		if r.prepaid {
			r.budget.ReleaseN(limit)
		}
		es := make([]*entry[T], len(entries))
		for i := range entries {
			es[i] = &entries[i]
		}
		r.releaser.release(es)
		if paused && len(es) > 0 {
			r.reclaimAfterPause()
		}
		return claimResult{limit: limit, n: len(rows), sweep: plan.sweep, took: took, err: err}
	}
	stale := 0
	var ends []func()
	for i := range entries {
		e := &entries[i]
		if old := r.held[e.row.ID]; old != nil && !old.lost.Load() {
			// This worker claimed the job again after a rescuer took it
			// from an earlier claim of ours: that attempt no longer owns
			// it. Its handler is cancelled and its result dropped.
			ends = append(ends, r.leases.loseLocked(old))
			stale++
		}
		r.held[e.row.ID] = e
		r.queue = append(r.queue, e)
	}
	r.inflight -= reserved - len(rows)
	if r.prepaid {
		r.budget.ReleaseN(limit - len(rows))
	}
	r.handlers.startLocked(len(r.queue), r.stopped)
	r.mu.Unlock()
	runAll(ends)
	if stale > 0 {
		r.log.Warn("skipjack: claimed jobs again whose earlier claims by this worker had been rescued; the stale attempts are cancelled and their results dropped", "jobs", stale)
	}
	if len(rows) < limit {
		signal(r.capacityFreed)
	}
	// A sweep that took its few jobs counts as full: the claim after it
	// takes the rest from the floors it lowered.
	r.lastShort.Store(len(rows) < plan.limit)
	res := claimResult{limit: plan.limit, n: len(rows), turnWaited: turnWaited, sweep: plan.sweep, took: took, err: err}
	for i, row := range rows {
		if i == 0 || row.ID < res.minID {
			res.minID = row.ID
		}
		res.maxID = max(res.maxID, row.ID)
	}
	return res
}

// claimBufs is the free list of the slices claims scan their rows into:
// it owns those slices between claims. The claims of a run (claim) take
// one before their statement and give it back once its rows are copied
// into entries; it needs no lock of the run, being a channel.
type claimBufs chan []ClaimedRow

// newClaimBufs returns a free list that keeps at most maxClaimsInFlight
// slices.
func newClaimBufs() claimBufs { return make(claimBufs, maxClaimsInFlight) }

// take returns a kept slice, empty, or nil when none is kept.
func (b claimBufs) take() []ClaimedRow {
	select {
	case buf := <-b:
		return buf[:0]
	default:
		return nil
	}
}

// keep keeps the slice a claim scanned its rows into for a later claim,
// once the rows are copied into entries: cleared, so that it holds no
// payload alive, and only while the free list has room (one per claim in
// flight). A worker thus keeps at most maxClaimsInFlight slices, each as
// large as its largest claim (about 300 KB for 2,000 jobs).
func (b claimBufs) keep(rows []ClaimedRow) {
	clear(rows)
	select {
	case b <- rows[:0]:
	default:
	}
}

// limitPoll is how soon a worker of a queue whose concurrency limit is
// reached claims again: jobs that other processes finish free the limit
// without telling it.
const limitPoll = 50 * time.Millisecond

// headroomWait says, after a claim of a queue with limits came back
// short, when to claim next: when the limit that held it back has room
// again, the moment the oldest start leaves the rate window, or after
// limitPoll (at most pollInterval) while the concurrency limit is reached
// or, for a queue with a per-key limit, while due jobs wait (their keys
// are at their limit: the claim's turn claimed every job it could). It
// reports false when no limit held the claim back: an empty queue waits
// for its notifications and polls as usual.
func headroomWait(h headroom, spec QueueSpec, pollInterval time.Duration) (time.Duration, bool) {
	switch {
	case !h.Due:
	case h.RateWaitMs > 0:
		return time.Duration(h.RateWaitMs) * time.Millisecond, true
	case spec.LimitConcurrency > 0 && int(h.Claimed) >= spec.LimitConcurrency:
		return min(limitPoll, pollInterval), true
	case spec.PerKeyConcurrency > 0:
		return min(limitPoll, pollInterval), true
	}
	return 0, false
}

// decode decodes a payload into p. A panic of the payload type's own
// decoding (a custom UnmarshalJSON or UnmarshalText) is recovered, logged
// to log with its stack and returned as the error, so the job fails with
// it instead of the process.
func decode[T any](log *slog.Logger, payload []byte, p *T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			log.Error("skipjack: payload decoding panicked", "panic", fmt.Sprint(v), "stack", string(stack))
			err = fmt.Errorf("decode payload: %w", &skipjack.PanicError{Value: v, Stack: stack})
		}
	}()
	if err := json.Unmarshal(payload, p); err != nil {
		return fmt.Errorf("decode payload: %w", err)
	}
	return nil
}
