package skipjack_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestLockHeldAcrossHeartbeats is the CompleteTx scenario of issue 9: one
// handler acknowledges its job with CompleteTx and keeps its transaction
// (and so the job's row lock) open for longer than the queue's 3s lease,
// while six other handlers of the same worker run for as long. A second
// worker polls and rescues all the while. Every heartbeat of the first
// worker must renew the six leases without waiting for the locked row, so
// no job may run twice, and the CompleteTx handler must commit.
func TestLockHeldAcrossHeartbeats(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const long = 6
	runs := newTally()
	dup := make(chan int64, long+1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	committed := make(chan error, 1)
	handle := func(hctx context.Context, job *slow.Job) error {
		runs.add(job.ID)
		if runs.count(job.ID) > 1 {
			dup <- job.ID
			return nil
		}
		if job.Payload.N != 0 {
			select {
			case <-release:
				return nil
			case <-hctx.Done():
				return context.Cause(hctx)
			}
		}
		tx, err := pool.Begin(hctx)
		if err != nil {
			committed <- err
			return err
		}
		defer tx.Rollback(ctx)
		if err := slow.CompleteTx(hctx, tx, job); err != nil {
			committed <- err
			return err
		}
		select { // a slow call before the commit
		case <-release:
		case <-hctx.Done():
			committed <- context.Cause(hctx)
			return context.Cause(hctx)
		}
		err = tx.Commit(hctx)
		committed <- err
		return err
	}
	cfg := skipjack.WorkerConfig{Concurrency: 8, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}
	cfg.WorkerID = "first"
	start(t, slow.NewWorker(pool, handle, cfg))
	for n := range long + 1 {
		if _, err := slow.Enqueue(ctx, pool, slow.Payload{N: int64(n)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the first worker to run every job", func() bool { return runs.len() == long+1 })
	// The first worker's leases as its claims set them; the CompleteTx
	// row is locked and reads as still running.
	expiry := leaseHorizon(t, pool)

	cfg.WorkerID = "second"
	start(t, slow.NewWorker(pool, handle, cfg))
	t.Cleanup(releaseAll) // runs before the workers stop

	// Wait until the first leases would have lapsed long ago: the second
	// worker rescues every 1.5s (±20%), so by 2s past the horizon it has
	// rescued whatever lapsed, and reruns it at once.
	deadline := time.Now().Add(15 * time.Second)
	for queryInt(t, pool, `SELECT (now() > $1::timestamptz + interval '2 seconds')::int`, expiry) == 0 {
		select {
		case id := <-dup:
			t.Fatalf("job %d ran twice while another handler held a row lock across heartbeats", id)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the database clock did not pass the lease horizon")
		}
	}
	releaseAll()
	if err := <-committed; err != nil {
		t.Errorf("CompleteTx handler: %v, want a committed transaction", err)
	}
	waitFor(t, 10*time.Second, "every job to be acknowledged", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow`) == 0
	})
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once, want 0", d)
	}
}

// leaseHorizon returns the latest lease expiry of the slow queue's running
// jobs.
func leaseHorizon(t testing.TB, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var at time.Time
	if err := pool.QueryRow(context.Background(), `SELECT max(lease_expires_at) FROM skipjack.slow WHERE state = 'running'`).Scan(&at); err != nil {
		t.Fatalf("lease horizon: %v", err)
	}
	return at
}

// TestOperatorLockAcrossHeartbeats has an operator hold a row lock on one
// running job (SELECT ... FOR UPDATE) for longer than lease minus one
// heartbeat interval while four other jobs of the same worker run. The
// heartbeat must skip the locked row instead of waiting for it: the other
// leases keep being renewed during the lock, and none of their handlers
// is cancelled for a lease it could not prove.
func TestOperatorLockAcrossHeartbeats(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const jobs = 5
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	var mu sync.Mutex
	lost := map[int64]error{}
	running := make(chan int64, jobs)
	start(t, slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		running <- job.ID
		select {
		case <-release:
			return nil
		case <-hctx.Done():
			mu.Lock()
			lost[job.ID] = context.Cause(hctx)
			mu.Unlock()
			return context.Cause(hctx)
		}
	}, skipjack.WorkerConfig{Concurrency: 8, Logger: quietLogger(t)}))
	t.Cleanup(releaseAll) // runs before the worker stops
	for n := range jobs {
		if _, err := slow.Enqueue(ctx, pool, slow.Payload{N: int64(n)}); err != nil {
			t.Fatal(err)
		}
	}
	var locked int64
	for i := range jobs {
		select {
		case id := <-running:
			if i == 0 {
				locked = id
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the jobs did not start")
		}
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var lockedAt time.Time
	if err := tx.QueryRow(ctx, `SELECT now() FROM skipjack.slow WHERE id = $1 FOR UPDATE`, locked).Scan(&lockedAt); err != nil {
		t.Fatal(err)
	}
	// Hold the lock for 3.5s (lease 3s, heartbeat every 1s): every other
	// lease must have been renewed past lockedAt + 3s meanwhile.
	waitFor(t, 10*time.Second, "the other leases to be renewed during the lock", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow WHERE id <> $1 AND lease_expires_at > $2::timestamptz + interval '3 seconds'`, locked, lockedAt) == jobs-1
	})
	waitFor(t, 10*time.Second, "the lock to be held for 3.5s", func() bool {
		return queryInt(t, pool, `SELECT (now() > $1::timestamptz + interval '3500 milliseconds')::int`, lockedAt) == 1
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for id, cause := range lost {
		if id != locked {
			t.Errorf("job %d (not the locked one) was cancelled with %v during the lock", id, cause)
		}
	}
	mu.Unlock()
	releaseAll()
	waitFor(t, 10*time.Second, "every job to complete", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.slow`) == 0
	})
}
