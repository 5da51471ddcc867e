package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// The reliability review's third round: each test here reproduces one way
// the engine wedged, stalled or ran finished work again at its edges.

// TestUnstorableErrorText has handlers return (and panic with) error texts
// Postgres cannot store as text: a NUL byte and invalid UTF-8. Before, the
// batched Resolve failed with SQLSTATE 22021 and was retried forever with
// every job in its batch left running. Now texts are made storable before
// they are sent: every job settles, and the stored text keeps what it
// could.
func TestUnstorableErrorText(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 12)
	ctx := context.Background()
	const bad = "upstream said: \x00\xff binary body"
	const ordinary, successes = 20, 200
	start(t, fast.NewWorker(pool, func(_ context.Context, job *fast.Job) error {
		switch n := job.Payload.N; {
		case n == 0:
			return skipjack.Permanent(errors.New(bad))
		case n == 1:
			panic(bad)
		case n <= ordinary+1:
			return skipjack.Permanent(fmt.Errorf("ordinary failure %d", n))
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 8, Logger: quietLogger(t)}))
	ps := make([]fast.Payload, ordinary+2+successes)
	for i := range ps {
		ps[i] = fast.Payload{N: int64(i)}
	}
	if _, err := fast.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "every job to settle", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE state <> 'failed'`) == 0 &&
			queryInt(t, pool, `SELECT count(*) FROM skipjack.fast`) == ordinary+2
	})
	var msg string
	if err := pool.QueryRow(ctx, `SELECT errors->-1->>'error' FROM skipjack.fast WHERE payload->>'n' = '0'`).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	if want := "upstream said: \uFFFD binary body"; msg != want {
		t.Errorf("stored error = %q, want %q (NUL dropped, invalid UTF-8 replaced)", msg, want)
	}
	if err := pool.QueryRow(ctx, `SELECT errors->-1->>'error' FROM skipjack.fast WHERE payload->>'n' = '1'`).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "upstream said: \uFFFD binary body") {
		t.Errorf("stored panic = %q, want the panic value made storable", msg)
	}
}

// TestHungSuspectReleasesIsolation runs a suspect (a job rescued twice,
// which runs alone) whose handler ignores its context, beside a second
// queue on the same pool. Before, isolation ended only when the handler
// returned, so nothing else ran on the pool again. Now it ends when the
// attempt ends in any way: here when the worker abandons the handler at
// the queue's timeout plus its lease, after which the other queue's jobs
// all run.
func TestHungSuspectReleasesIsolation(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	var first atomic.Bool
	suspect := enqueueFast(t, pool)
	if _, err := pool.Exec(ctx, `UPDATE skipjack.fast SET rescues = 2 WHERE id = $1`, suspect); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		if first.CompareAndSwap(false, true) {
			close(started)
			<-hang // ignores its context
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))
	<-started
	var done atomic.Int64
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		done.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 8, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	const others = 120
	ps := make([]demo.Payload, others)
	if _, err := demo.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	// The fast queue's timeout is 500ms and its lease 2s: the suspect is
	// abandoned 2.5s after it started; allow generous slack for -race.
	waitFor(t, 15*time.Second, "the other queue's jobs to run after the suspect was abandoned", func() bool {
		return done.Load() == others
	})
}

// TestCancelPrefetched cancels a job that a worker has claimed but not yet
// started (its one handler is busy). Before, the heartbeat saw the cancel
// but dropped it for a job without a context, so the handler later ran
// it. Now the job never starts and ends failed "cancelled".
func TestCancelPrefetched(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	ctx := context.Background()
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	ran := newTally()
	start(t, slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		ran.add(job.ID)
		if job.Payload.N == 0 {
			<-release
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)}))
	t.Cleanup(releaseAll)
	busy, err := slow.Enqueue(ctx, pool, slow.Payload{N: 0})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the busy job to start", func() bool { return ran.count(busy) == 1 })
	victim, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second job to be prefetched", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE id = $1 AND state = 'running'`, victim) == 1
	})
	if n, err := slow.Cancel(ctx, pool, victim); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	// The slow queue's lease is 3s: a heartbeat every second sees the
	// cancel. Wait for two, then free the handler.
	time.Sleep(2500 * time.Millisecond)
	releaseAll()
	waitFor(t, 10*time.Second, "the cancelled job to fail", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE id = $1 AND state = 'failed' AND errors->-1->>'error' = 'cancelled'`, victim) == 1
	})
	time.Sleep(200 * time.Millisecond)
	if n := ran.count(victim); n != 0 {
		t.Errorf("the prefetched job cancelled before it started ran %d times, want 0", n)
	}
}

// TestTableLockLongerThanLease holds a SHARE lock on the queue table (what
// a non-concurrent CREATE INDEX takes) for longer than the lease while the
// worker's jobs finish. Before, the worker dropped the results it could
// not write or renew, and a rescuer made the finished jobs pending again
// once the lock went: they all ran twice. Now liveness is proven off the
// job rows and results are kept until the fence decides: no job runs
// again and every result lands after the lock.
func TestTableLockLongerThanLease(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const jobs = 10
	runs := newTally()
	cfg := skipjack.WorkerConfig{Concurrency: jobs, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}
	handle := func(hctx context.Context, job *slow.Job) error {
		runs.add(job.ID)
		select {
		case <-time.After(time.Second):
			return nil
		case <-hctx.Done():
			return context.Cause(hctx)
		}
	}
	start(t, slow.NewWorker(pool, handle, cfg))
	ps := make([]slow.Payload, jobs)
	if _, err := slow.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "every job to start", func() bool { return runs.len() == jobs })

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE skipjack.slow IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	// A second worker rescues at once when it starts and every 1.5s.
	start(t, slow.NewWorker(pool, handle, cfg))
	time.Sleep(5 * time.Second) // the lease is 3s
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "every result to land after the lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow`) == 0
	})
	time.Sleep(2 * time.Second) // a rerun would have started by now
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d of %d finished jobs ran again after a table lock longer than the lease, want 0", d, jobs)
	}
}

// TestRowLockThenFastRescuer holds a row lock on a running job across
// several heartbeats and past its lease, then releases it and starts a
// second worker at once (its rescuer runs on start). Before, the first
// worker's heartbeat counted the locked row alive without renewing it, the
// lease ran out in the database, and the fast rescuer handed the job to
// the second worker while the first still ran it. Now the worker's
// liveness is its own row: the job runs once.
func TestRowLockThenFastRescuer(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	runs := newTally()
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	handle := func(hctx context.Context, job *slow.Job) error {
		runs.add(job.ID)
		select {
		case <-release:
			return nil
		case <-hctx.Done():
			return context.Cause(hctx)
		}
	}
	cfg := skipjack.WorkerConfig{Concurrency: 2, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}
	start(t, slow.NewWorker(pool, handle, cfg))
	id, err := slow.Enqueue(ctx, pool, slow.Payload{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job to start", func() bool { return runs.count(id) == 1 })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM skipjack.slow WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4500 * time.Millisecond) // past the 3s lease, over four heartbeats
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	start(t, slow.NewWorker(pool, handle, cfg))
	time.Sleep(2 * time.Second)
	if n := runs.count(id); n != 1 {
		t.Errorf("the job ran %d times while its first run was alive, want 1", n)
	}
	releaseAll()
	waitFor(t, 10*time.Second, "the job to complete", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow`) == 0
	})
}

// TestSuspectCountResets checks that rescues stop making a job a suspect
// once an attempt of it ended normally or an operator retried it: a job
// rescued twice that then fails with an ordinary error runs its next
// attempt as an ordinary job, and Retry of a failed suspect resets it.
func TestSuspectCountResets(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	seen := make(chan int, 4)
	start(t, fast.NewWorker(pool, func(_ context.Context, job *fast.Job) error {
		seen <- job.Rescues
		if job.Attempt == 1 {
			return errors.New("transient")
		}
		return skipjack.Permanent(errors.New("done"))
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))
	id, err := fast.Enqueue(ctx, pool, fast.Payload{}, skipjack.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE skipjack.fast SET rescues = 2, run_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got != 2 {
		t.Fatalf("first run saw %d rescues, want 2", got)
	}
	if got := <-seen; got != 0 {
		t.Errorf("the run after an ordinary failure saw %d rescues, want 0 (reset by the attempt's outcome)", got)
	}
	waitFor(t, 10*time.Second, "the job to fail", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE id = $1 AND state = 'failed'`, id) == 1
	})
	if _, err := pool.Exec(ctx, `UPDATE skipjack.fast SET rescues = 3 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if n, err := fast.Retry(ctx, pool, id); err != nil || n != 1 {
		t.Fatalf("Retry = %d, %v; want 1, nil", n, err)
	}
	if got := <-seen; got != 0 {
		t.Errorf("the run after an operator's Retry saw %d rescues, want 0", got)
	}
}

// TestAckRacingCancel has an operator cancel a job while its batched
// acknowledgement waits for the job's row lock. Before, the ack's delete
// re-checked the committed cancel and skipped the row while its cancel
// branch read the statement's older snapshot and skipped it too: the job
// stayed running with nobody holding it. Now the two resolve in one
// decision and the job ends failed "cancelled". The worker must not
// report the ack as unmatched: the job would then end only once its lease
// lapsed, given back by a heartbeat (see giveBackUnheld), not by the ack.
func TestAckRacingCancel(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	started := make(chan int64, 1)
	proceed := make(chan struct{})
	logs := newLogs(t)
	stop := start(t, slow.NewWorker(pool, func(_ context.Context, job *slow.Job) error {
		started <- job.ID
		<-proceed
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: logs.logger()}))
	id, err := slow.Enqueue(ctx, pool, slow.Payload{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM skipjack.slow WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	waitFor(t, 5*time.Second, "the acknowledgement to wait for the row lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%-- name: Complete%'`) == 1
	})
	if n, err := slow.Cancel(ctx, tx, id); err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1, nil", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the job to end failed as cancelled", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE id = $1 AND state = 'failed' AND errors->-1->>'error' = 'cancelled'`, id) == 1
	})
	stop()
	if logs.contains("WARN", "matched no running attempt") || logs.contains("WARN", "without it holding them") {
		t.Errorf("the ack did not decide the cancelled job itself; logs:\n%s", logs)
	}
}

// racingDB runs a statement of its own on pool just before the second
// QueryRow that goes through it: the moment between a unique enqueue's
// insert and its lookup of the job that holds the key.
type racingDB struct {
	skipjack.DBTX
	pool  *pgxpool.Pool
	calls int
	sql   string
	t     testing.TB
}

func (d *racingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	d.calls++
	if d.calls == 2 {
		if _, err := d.pool.Exec(ctx, d.sql); err != nil {
			d.t.Errorf("racing statement: %v", err)
		}
	}
	return d.DBTX.QueryRow(ctx, sql, args...)
}

// TestDuplicateLeavesUniqueStates enqueues a duplicate whose conflicting
// job fails for good between the insert that found the conflict and the
// lookup of its id. Before, Enqueue returned id 0 with ErrDuplicate. Now
// the key is free again, so the job is inserted and its id returned.
func TestDuplicateLeavesUniqueStates(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	first, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	db := &racingDB{DBTX: pool, pool: pool, t: t,
		sql: fmt.Sprintf(`UPDATE skipjack.uniq SET state = 'failed', finished_at = now() WHERE id = %d`, first)}
	id, err := uniq.Enqueue(ctx, db, uniq.Payload{Key: "k", N: 1})
	switch {
	case errors.Is(err, skipjack.ErrDuplicate) && id == 0:
		t.Fatalf("Enqueue = 0, %v: a duplicate must name the job that holds its key", err)
	case err != nil:
		t.Fatalf("Enqueue = %d, %v; want the new job's id once the key is free", id, err)
	case id == first:
		t.Fatalf("Enqueue returned the failed job's id %d", id)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.uniq WHERE id = $1 AND state = 'pending'`, id); n != 1 {
		t.Errorf("job %d is not pending", id)
	}
}

// TestSuspectRunsAlone checks isolation itself, deterministically: while
// the jobs of another queue on the same pool keep four handlers busy, a
// suspect (a job rescued twice) must wait for them to settle and then run
// with no other handler of the pool running beside it.
func TestSuspectRunsAlone(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	var running, beside atomic.Int64
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		running.Add(1)
		defer running.Add(-1)
		time.Sleep(50 * time.Millisecond)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)}))
	if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, 400)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the other queue's handlers to run", func() bool { return running.Load() > 0 })
	id, err := fast.Enqueue(ctx, pool, fast.Payload{}, skipjack.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE skipjack.fast SET rescues = 2, run_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	start(t, fast.NewWorker(pool, func(context.Context, *fast.Job) error {
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if n := running.Load(); n > beside.Load() {
				beside.Store(n)
			}
		}
		close(ran)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the suspect did not run")
	}
	if n := beside.Load(); n != 0 {
		t.Errorf("%d handlers of the pool ran beside the suspect, want 0", n)
	}
}
