package skipjack_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// Operators act on prefetched jobs: a job cancelled while it waits for a
// handler never starts, and a queue paused while jobs wait for handlers
// starts none of them until it is resumed. The demo queue's lease is 30s,
// so its worker's periodic heartbeat (which also reports cancels) comes
// only every 10s: these tests act right after one, so that it cannot be
// what delivers the cancel or the pause.

// leaseOf returns the lease expiry of job id of the demo queue, which
// every heartbeat of its worker moves.
func leaseOf(t *testing.T, pool *pgxpool.Pool, id int64) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(lease_expires_at, 'epoch') FROM skipjack.demo WHERE id = $1`, id).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// afterHeartbeat waits until the worker holding running job id renews its
// lease: its next periodic heartbeat is then a whole interval (10s) away.
func afterHeartbeat(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	before := leaseOf(t, pool, id)
	waitFor(t, 30*time.Second, "a heartbeat", func() bool { return !leaseOf(t, pool, id).Equal(before) })
}

// busyThenVictim starts a demo worker with one handler (with cfg's other
// settings), occupies it with a job that holds it until release is
// called, and enqueues a victim that the worker prefetches. It returns the
// two ids and the tally of handler runs.
func busyThenVictim(t *testing.T, pool *pgxpool.Pool, cfg skipjack.WorkerConfig) (busy, victim int64, ran *tally, release func()) {
	t.Helper()
	ctx := context.Background()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	ran = newTally()
	cfg.Concurrency = 1
	cfg.Logger = quietLogger(t)
	start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		ran.add(job.ID)
		if job.Payload.Label == "busy" {
			<-hold
		}
		return nil
	}, cfg))
	t.Cleanup(release)
	busy, err := demo.Enqueue(ctx, pool, demo.Payload{Label: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the busy job to start", func() bool { return ran.count(busy) == 1 })
	if victim, err = demo.Enqueue(ctx, pool, demo.Payload{Label: "victim"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the victim to be prefetched", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE id = $1 AND state = 'running'`, victim) == 1
	})
	return busy, victim, ran, release
}

// cancelledQuery counts the job $1 if it ended failed as cancelled.
const cancelledQuery = `SELECT count(*) FROM skipjack.demo WHERE id = $1 AND state = 'failed' AND errors->-1->>'error' = 'cancelled'`

// TestCancelReachesPrefetchedAtOnce cancels a prefetched job while the
// worker's one handler stays busy. Before, the worker learned of the
// cancel only at its next heartbeat (every lease/3) and then merely marked
// the job, which kept its prefetch slot and stayed running until the
// handler freed. Now Cancel notifies the queue's workers, which give the
// job back at once: it ends failed "cancelled" within moments, long
// before the next heartbeat, with its handler never run.
func TestCancelReachesPrefetchedAtOnce(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	busy, victim, ran, release := busyThenVictim(t, pool, skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond})
	afterHeartbeat(t, pool, busy)
	cancelled := time.Now()
	if n, err := demo.Cancel(ctx, pool, victim); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	// The next heartbeat is 10s after the last; 5s leave a load of 8 ample
	// time for a notification and two statements.
	deadline := cancelled.Add(5 * time.Second)
	for queryInt(t, pool, cancelledQuery, victim) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if queryInt(t, pool, cancelledQuery, victim) == 0 {
		t.Errorf("the cancelled prefetched job had not ended failed \"cancelled\" %v after Cancel (its handler slot still busy)", time.Since(cancelled).Round(time.Millisecond))
	} else {
		t.Logf("the cancelled prefetched job failed %v after Cancel", time.Since(cancelled).Round(time.Millisecond))
	}
	release()
	waitFor(t, 20*time.Second, "the busy job to finish", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE id = $1`, busy) == 0
	})
	waitFor(t, 20*time.Second, "the victim to end cancelled", func() bool { return queryInt(t, pool, cancelledQuery, victim) == 1 })
	if n := ran.count(victim); n != 0 {
		t.Errorf("the job cancelled while prefetched ran %d times, want 0", n)
	}
}

// TestCancelPrefetchedPollOnly cancels a prefetched job of a PollOnly
// worker (no notifications) right after a heartbeat, and frees its one
// handler 1.5s later, long before the next heartbeat. Before, the job
// started: nothing told the worker of the cancel in time. Now a job that
// waited in prefetch for a second or more is checked before it starts, and
// the cancelled one never runs.
func TestCancelPrefetchedPollOnly(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	busy, victim, ran, release := busyThenVictim(t, pool, skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond, PollOnly: true})
	afterHeartbeat(t, pool, busy)
	if n, err := demo.Cancel(ctx, pool, victim); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	time.Sleep(1500 * time.Millisecond) // the slot frees later, as in production
	release()
	waitFor(t, 20*time.Second, "the busy job to finish", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE id = $1`, busy) == 0
	})
	// Whatever became of the victim is settled once its row is no longer
	// running (a handler that ran it completes and deletes it).
	waitFor(t, 20*time.Second, "the victim to be settled", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE id = $1 AND state = 'running'`, victim) == 0
	})
	if n := ran.count(victim); n != 0 {
		t.Errorf("the job cancelled while prefetched ran %d times, want 0", n)
	}
	if queryInt(t, pool, cancelledQuery, victim) != 1 {
		t.Error("the cancelled job did not end failed \"cancelled\"")
	}
}

// heldJobs is a demo worker (Concurrency 4) whose handlers hold their
// jobs until release: 12 jobs enqueued, 4 running, 4 prefetched, 4 pending.
type heldJobs struct {
	pool    *pgxpool.Pool
	started atomic.Int64 // handlers started
	first   int64        // the id of the first job started
	release func()       // lets every handler return, once
}

// heldJobsTotal is how many jobs startHeldJobs enqueues.
const heldJobsTotal = 12

// startHeldJobs starts a heldJobs worker on pool with cfg (Concurrency 4,
// a quiet logger) and waits until 4 handlers run and 4 jobs are prefetched.
func startHeldJobs(t *testing.T, pool *pgxpool.Pool, cfg skipjack.WorkerConfig) *heldJobs {
	t.Helper()
	h := &heldJobs{pool: pool}
	hold := make(chan struct{})
	var once sync.Once
	h.release = func() { once.Do(func() { close(hold) }) }
	first := make(chan int64, 1)
	cfg.Concurrency, cfg.Logger = 4, quietLogger(t)
	start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		if h.started.Add(1) == 1 {
			first <- job.ID
		}
		<-hold
		return nil
	}, cfg))
	t.Cleanup(h.release) // before the worker's stop: cleanups run last first
	if _, err := demo.EnqueueMany(context.Background(), pool, make([]demo.Payload, heldJobsTotal)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "4 handlers to start and 4 jobs to be prefetched", func() bool {
		return h.started.Load() == 4 && queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 8
	})
	h.first = <-first
	return h
}

// givenBack reports whether the 4 prefetched jobs are pending again with
// their attempts restored (the 4 never claimed are pending too).
func (h *heldJobs) givenBack(t *testing.T) bool {
	return queryInt(t, h.pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0`) == heldJobsTotal-4
}

// running counts the jobs that are running (or prefetched).
func (h *heldJobs) running(t *testing.T) int64 {
	return queryInt(t, h.pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`)
}

// resumeAndFinish resumes the queue and checks that every job then runs,
// each once.
func (h *heldJobs) resumeAndFinish(t *testing.T) {
	t.Helper()
	if err := demo.Resume(context.Background(), h.pool); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every job to run after Resume", func() bool {
		return queryInt(t, h.pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	if n := h.started.Load(); n != heldJobsTotal {
		t.Errorf("%d handlers started in all, want %d (each job once)", n, heldJobsTotal)
	}
}

// TestPauseStopsPrefetched pauses a queue whose worker (Concurrency 4)
// runs 4 slow handlers and holds 4 more jobs prefetched, right after a
// heartbeat. Before, the prefetched jobs stayed claimed and started as
// soon as the handlers returned, after Pause had returned. Now Pause
// notifies the workers, which give their prefetched jobs back (pending,
// attempt restored): no handler starts after Pause until Resume, and then
// every job runs.
func TestPauseStopsPrefetched(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	h := startHeldJobs(t, pool, skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond})
	afterHeartbeat(t, pool, h.first)
	if err := demo.Pause(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	atPause := h.started.Load()
	// Given back (attempt restored) on the notification: nothing else
	// gives prefetched jobs back, however long the wait.
	waitFor(t, 30*time.Second, "the 4 prefetched jobs to be given back", func() bool { return h.givenBack(t) })
	h.release()
	waitFor(t, 20*time.Second, "the running jobs to finish", func() bool { return h.running(t) == 0 })
	// Handler slots are free now: a prefetched job would have started.
	// Give the worker time to start one (it would at once) before looking.
	time.Sleep(500 * time.Millisecond)
	if n := h.started.Load() - atPause; n != 0 {
		t.Errorf("%d handlers started after Pause returned, want 0", n)
	}
	h.resumeAndFinish(t)
}

// TestPauseStopsPrefetchedPollOnly pauses a queue whose worker listens to
// nothing (PollOnly) while it runs 4 slow handlers and holds 4 more jobs
// prefetched. It hears no notification; before, its prefetched jobs
// started as soon as the handlers returned. Now a prefetched job that
// waited a second or more is checked before it starts, as for a cancel,
// and the check reads the pause: the worker gives its prefetched jobs back
// and no handler starts until Resume.
func TestPauseStopsPrefetchedPollOnly(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	h := startHeldJobs(t, pool, skipjack.WorkerConfig{PollInterval: 100 * time.Millisecond, PollOnly: true})
	afterHeartbeat(t, pool, h.first)
	if err := demo.Pause(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	atPause := h.started.Load()
	time.Sleep(1500 * time.Millisecond) // the slots free later, as in production
	h.release()
	waitFor(t, 30*time.Second, "the running jobs to finish and the 4 prefetched to be given back (pending, attempt restored)", func() bool {
		return h.running(t) == 0 && h.givenBack(t)
	})
	if n := h.started.Load() - atPause; n != 0 {
		t.Errorf("%d handlers started after Pause returned, want 0", n)
	}
	h.resumeAndFinish(t)
}
