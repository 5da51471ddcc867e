package skipjackimpl

import (
	"sync"
	"time"
)

// floorSlack is how far behind the clock of the claim that set it a floor
// stays: a job enqueued by a transaction that commits less than this
// after it started (its run_at is the transaction's now()) is never below
// the floors of the claims that run while it commits. A job whose
// enqueueing transaction took longer, or whose run_at was set in the past,
// may be below them and waits for the next sweep (see claimFloor).
//
// Under a pinned xmin horizon every floored claim still walks the entries
// of the jobs claimed during the last floorSlack: at 1,000 jobs/s, about
// 1,000 entries, against one entry per job claimed since the horizon was
// pinned without floors (18,000 buffers per claim after 2 minutes at 500
// jobs/s, BENCHMARKS.md, issue 42).
const floorSlack = time.Second

// pinnedSlack is how far behind its claim's clock a floor stays while the
// last sweep took pinnedSweep or longer: a sweep that slow walked many
// entries that nothing could mark dead, so the horizon is pinned (or
// readers hold old snapshots), and every floored claim walks the entries of
// the jobs claimed during its slack, with a heap fetch each. Under a
// 5-minute pin at 1,000 jobs/s a floored claim read about 950 shared
// buffers with floorSlack and 260 with pinnedSlack, and the pin's pickup
// p99 was 64 to 159 ms in four runs, against 71 ms to 4.9 s in five
// (BENCHMARKS.md, issue 42). The price is paid while sweeps are slow only:
// a job whose enqueueing transaction took between pinnedSlack and
// floorSlack to commit waits for the next sweep, as one that took longer
// than floorSlack always does.
const pinnedSlack = 250 * time.Millisecond

// pinnedSweep is the sweep duration from which floors keep pinnedSlack. A
// sweep with a clean horizon claims the first due job of the claim index
// after a few entries the scans before it could not mark dead: well under
// a millisecond on the server. 30 to 40 s into a pin at 1,000 jobs/s,
// sweeps read 30,000 to 40,000 shared buffers and took 40 to 60 ms.
const pinnedSweep = 20 * time.Millisecond

// pinnedClaimGap is the longest a claim waits after the last one was
// sent, while the last sweep took pinnedSweep or longer, unless the claim
// before it filled its limit (see claimGap). Under a pinned horizon a
// floored claim walks the dead entries of the jobs claimed during its
// slack (pinnedSlack), with a heap fetch each, however few jobs it takes,
// and every notified enqueue wakes a claim: at 1,000 single-row enqueues
// a second, a worker at WorkerConfig{} sent about 450 claims a second of
// about 2 jobs each, each reading about 210 shared buffers, on the pages
// the enqueues and acknowledgements were writing (BENCHMARKS.md, issue
// 42). Claims at most this often take the jobs that arrived meanwhile in
// one walk. The price, while the horizon is pinned: a job waits up to
// this much longer for its claim when claims keep up with the enqueues; a
// backlog is claimed as before, one full claim after another.
const pinnedClaimGap = 20 * time.Millisecond

// claimGapShare is how many times as long as the last claim took a claim
// after a short one waits while the horizon looks pinned, up to
// pinnedClaimGap: the worker's short claims then keep a connection busy
// for at most a quarter of the time. A server with room to spare answers a
// floored claim under a pin quickly, and its jobs wait a few milliseconds
// more; a server at its CPU's edge answers slowly, and the claims space
// out to pinnedClaimGap. Under a 5-minute pin at 1,000 jobs/s on a machine
// with room to spare, a fixed gap of pinnedClaimGap raised the pickup p50
// from 2.0 to 10-11 ms and the p99 from 7 to 30 ms; with this share they
// were 2.2-2.3 ms and 14-15 ms, and the claims read 17% fewer buffers per
// job than with no gap (BENCHMARKS.md, issue 42).
const claimGapShare = 4

// sweepLimit is how many jobs a sweep claims. A sweep walks every dead
// entry of the claim index when the horizon is pinned, so the jobs it
// claims wait as long as that walk; it claims one, and the claims after it
// (a sweep that claims its limit is a full claim, so another follows at
// once) start from the floors it lowered to what it found.
const sweepLimit = 1

// sweepShare bounds the time a worker's claims spend sweeping: a sweep
// follows the last one after PollInterval, or after sweepShare times as
// long as the last one took when that is longer. A sweep under a pinned
// horizon walks the entry of every job claimed since the pin began (at
// 1,000 jobs/s, 300,000 after 5 minutes), and a claim in flight holds
// capacity that jobs would otherwise be claimed with; below-floor jobs,
// rare, wait longer while it lasts.
const sweepShare = 10

// floors are the keys of the claim index from which a floored claim reads:
// for each priority p (only 0 for a queue without priorities), the jobs
// whose (run_at, id) is at least (runAts[p], ids[p]). The zero time is
// before every job.
type floors struct {
	runAts []time.Time
	ids    []int64
}

// claimFloor keeps the floors of a worker's claims. A claim walks the
// claim index of its queue (a partial index on pending jobs) in (run_at,
// id) order, skipping the entries of jobs no longer pending; while a
// session pins the xmin horizon, no such entry can be removed or marked
// dead, so an unfloored claim walks the entry of every job claimed since
// the pin began, and its cost grows with the pin's age. A floored claim
// starts past them: after a claim, the floor of each priority it took
// jobs of is the lowest (run_at, id) it took, or the claim's clock less
// floorSlack (pinnedSlack while sweeps are slow) if that is lower, so that
// jobs whose enqueueing transactions were still committing are not left
// below it.
//
// Jobs can still land below a floor: enqueued with a run_at in the past or
// by a transaction longer than that slack, released with their run_at kept
// (by another process, or by an old skipjack), or left pending by a claim
// that rolled back after locking them. So every every (the worker's
// PollInterval, the longest a job waits for a claim when no notification
// finds it; longer while sweeps are slow, see sweepShare) one claim reads
// the whole index: a sweep, which claims at most sweepLimit jobs and
// lowers the floors to what it found.
//
// Queues with a serial key or a per-key limit have no floors: their claims
// pass over due jobs that wait for their key.
type claimFloor struct {
	every time.Duration // how often a claim sweeps

	mu       sync.Mutex
	at       floors
	sweptAt  time.Time     // when the last sweep was sent
	took     time.Duration // how long the last sweep took
	sweeping bool          // a sweep is in flight (until swept)
}

// newClaimFloor returns the floors of a queue with ten priorities or one,
// all before every job, as if a sweep had just been sent (the first claims
// read the whole index anyway).
func newClaimFloor(priority bool, every time.Duration, now time.Time) *claimFloor {
	n := 1
	if priority {
		n = 10
	}
	return &claimFloor{every: every, at: floors{runAts: make([]time.Time, n), ids: make([]int64, n)}, sweptAt: now}
}

// claimPlan is how one claim statement reads the claim index.
type claimPlan struct {
	floored bool   // from floors on (ClaimFrom); else a sweep, or a worker without floors
	sweep   bool   // a sweep: reads the whole index for jobs below the floors (see claimFloor)
	floors  floors // the floors, when floored: a copy
	limit   int    // how many jobs the statement may claim
}

// plan returns the plan of a claim sent at now that may take limit jobs:
// a sweep when every (or sweepShare times the last sweep's duration) has
// passed since the last one was sent and none is in flight, else floored.
// (Under a pinned horizon a sweep can take longer than every: a second
// one beside it would walk the same entries again.) A nil claimFloor (a
// worker without floors) plans unfloored claims.
func (f *claimFloor) plan(now time.Time, limit int) claimPlan {
	if f == nil {
		return claimPlan{limit: limit}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sweeping && now.Sub(f.sweptAt) >= max(f.every, sweepShare*f.took) {
		f.sweptAt, f.sweeping = now, true
		return claimPlan{sweep: true, limit: min(limit, sweepLimit)}
	}
	return claimPlan{
		floored: true,
		floors:  floors{runAts: append([]time.Time(nil), f.at.runAts...), ids: append([]int64(nil), f.at.ids...)},
		limit:   limit,
	}
}

// claimed moves the floors after a claim of plan p returned rows: a
// floored claim whose statement's clock was at sets the floor of each
// priority it took jobs of (see claimFloor); a sweep lowers the floors to
// the jobs it took below them.
func (f *claimFloor) claimed(p claimPlan, rows []ClaimedRow, at time.Time) {
	if f == nil || len(rows) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !p.floored || at.IsZero() {
		f.lowerLocked(rows)
		return
	}
	cut := at.Add(-f.slackLocked())
	lowest := make([]int, len(f.at.runAts)) // per priority, 1 + the index in rows of its lowest job
	for i, r := range rows {
		k := int(r.Priority)
		if k < 0 || k >= len(lowest) {
			continue
		}
		if j := lowest[k] - 1; j < 0 || before(r.RunAt, r.ID, rows[j].RunAt, rows[j].ID) {
			lowest[k] = i + 1
		}
	}
	for k, i := range lowest {
		if i == 0 {
			continue
		}
		r := rows[i-1]
		if r.RunAt.Before(cut) {
			f.at.runAts[k], f.at.ids[k] = r.RunAt, r.ID
		} else {
			f.at.runAts[k], f.at.ids[k] = cut, 0
		}
	}
}

// slackLocked returns how far behind a claim's clock the floors it sets
// stay: floorSlack, or pinnedSlack while the last sweep was slow enough to
// show a pinned horizon. f.mu must be held.
func (f *claimFloor) slackLocked() time.Duration {
	if f.took >= pinnedSweep {
		return pinnedSlack
	}
	return floorSlack
}

// claimGap returns how long after the last claim was sent the next one
// waits when the last came back short, given how long the last claim
// (not a sweep) took: claimGapShare times that, at most pinnedClaimGap,
// while the last sweep was slow enough to show a pinned horizon; else 0.
// A nil claimFloor (a worker without floors) never waits.
func (f *claimFloor) claimGap(lastTook time.Duration) time.Duration {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.took >= pinnedSweep {
		return min(pinnedClaimGap, claimGapShare*lastTook)
	}
	return 0
}

// swept records that a sweep returned, and how long it took.
func (f *claimFloor) swept(took time.Duration) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.took, f.sweeping = took, false
}

// released lowers the floors to the jobs given back pending with their
// run_at kept (Release), so that this worker's next claim finds them.
func (f *claimFloor) released(rows []ClaimedRow) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowerLocked(rows)
}

// lowerLocked lowers the floor of each row's priority to the row when it
// is below it; f.mu must be held.
func (f *claimFloor) lowerLocked(rows []ClaimedRow) {
	for _, r := range rows {
		k := int(r.Priority)
		if k < 0 || k >= len(f.at.runAts) {
			continue
		}
		if before(r.RunAt, r.ID, f.at.runAts[k], f.at.ids[k]) {
			f.at.runAts[k], f.at.ids[k] = r.RunAt, r.ID
		}
	}
}

// before reports whether the claim index orders the key (t1, id1) before
// (t2, id2).
func before(t1 time.Time, id1 int64, t2 time.Time, id2 int64) bool {
	return t1.Before(t2) || (t1.Equal(t2) && id1 < id2)
}
