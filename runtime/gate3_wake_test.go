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

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestGate3SettledBatchWakesLimitedClaimer checks that the written results
// of a queue with limits or a serial key wake the worker's own claimer:
// the jobs those results held back (a job of the same serial key, or jobs
// that became due while the worker's last claim came back short) are
// claimed at once, not at the next poll. The worker polls once an hour
// and its claim came back short with nothing due, so nothing else wakes
// it: the held-back jobs become due by the clock, which notifies no one.
func TestGate3SettledBatchWakesLimitedClaimer(t *testing.T) {
	t.Parallel()
	for _, v := range variants() {
		if v.name == "unlimited" {
			continue // an unlimited queue's jobs wait for nothing a result frees
		}
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			ctx := context.Background()
			release := make(chan struct{})
			var heldID atomic.Int64 // jobs with ids up to this one wait for release
			var ran counter
			start(t, v.worker(pool, func(ctx context.Context, id int64) error {
				if id <= heldID.Load() {
					<-release
				}
				return ran.handle(ctx, id)
			}, skipjack.WorkerConfig{Concurrency: 5, PollInterval: neverPoll, Logger: quietLogger(t)}))
			held := 3
			switch v.name {
			case "serial":
				held = 1 // one job of the key runs at a time
			case "per_key":
				held = 2 // two jobs of the tenant run at a time
			}
			heldID.Store(1 << 62)
			if err := v.enqueue(ctx, pool, held); err != nil {
				t.Fatal(err)
			}
			heldID.Store(queryInt(t, pool, fmt.Sprintf(`SELECT max(id) FROM skipjack.%q`, v.table)))
			wakeUntil(t, pool, v.table, "the held jobs to be claimed", func() bool {
				return queryInt(t, pool, fmt.Sprintf(`SELECT count(*) FROM skipjack.%q WHERE state = 'running'`, v.table)) == int64(held)
			})
			// Two jobs due in a second: the claim their enqueue's
			// notification starts finds nothing due.
			if err := v.enqueue(ctx, pool, 2, skipjack.Delay(time.Second)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the delayed jobs to become due (database clock)", func() bool {
				return queryInt(t, pool, fmt.Sprintf(`SELECT count(*) FROM skipjack.%q WHERE state = 'pending' AND run_at <= now()`, v.table)) == 2
			})
			close(release)
			waitFor(t, 30*time.Second, "the jobs that became due to run once the held jobs' results were written", func() bool {
				return ran.n.Load() == int64(held)+2
			})
		})
	}
}

// TestGate3FreedSlotClaimedPromptly checks limits.concurrency at capacity
// across processes: while another process holds every slot of capped's
// limit of 3, a worker (polling once an hour) keeps asking; each slot that
// process frees is claimed within limitPoll (50ms) plus load, measured on
// the database clock from the release to the claim, not at the next poll.
func TestGate3FreedSlotClaimedPromptly(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	// The other process: alive, holding three running jobs.
	if _, err := pool.Exec(ctx, `
		INSERT INTO skipjack._skipjack_workers (id, expires_at) VALUES ('other/1', now() + interval '1 hour');
		INSERT INTO skipjack.capped (payload, state, attempt, claim, lease_expires_at, worker)
		SELECT '{"n": -1}', 'running', 1, 1, now() + interval '1 hour', 'other/1' FROM generate_series(1, 3)`); err != nil {
		t.Fatal(err)
	}
	others := queryInt(t, pool, `SELECT max(id) FROM skipjack.capped`)
	claimedAt := make(chan time.Time, 3)
	hold := make(chan struct{})
	defer close(hold)
	claims := newClaimClock()
	start(t, capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
		var at time.Time
		// The claim's now(): its lease's expiry less the lease.
		if err := pool.QueryRow(ctx, `SELECT lease_expires_at - $2::interval FROM skipjack.capped WHERE id = $1`, job.ID, capped.Spec.Lease).Scan(&at); err != nil {
			return err
		}
		claimedAt <- at
		<-hold // keep the slot: the limit stays reached
		return nil
	}, skipjack.WorkerConfig{Concurrency: 3, PollInterval: neverPoll, Hooks: claims, Logger: quietLogger(t)}))
	if _, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, 3)); err != nil {
		t.Fatal(err)
	}
	enqueued := time.Now()
	wakeUntil(t, pool, "capped", "a claim refused by the limit", func() bool { return claims.since(enqueued) > 0 })
	for i := range 3 {
		var freed time.Time
		if err := pool.QueryRow(ctx, `UPDATE skipjack.capped SET state = 'completed', finished_at = now(), lease_expires_at = NULL
			WHERE id = $1 RETURNING now()`, others-int64(i)).Scan(&freed); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-claimedAt:
			gap := at.Sub(freed)
			if gap > 10*time.Second {
				t.Errorf("slot %d: claimed %v after the other process freed it (database clock), want within limitPoll plus load, far below the hour's poll", i+1, gap)
			} else {
				t.Logf("slot %d claimed %v after it was freed (database clock)", i+1, gap.Round(time.Millisecond))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("slot %d freed by another process was not claimed in 30s (the worker polls once an hour)", i+1)
		}
	}
}

// TestGate3RescueWakesClaimer checks that a worker's rescue of a dead
// worker's job wakes its own claimer: the rescued job runs at once, not at
// the next poll (an hour away). The job's lease is made to lapse only after
// the claim its insert notified, so only the rescue can start it.
func TestGate3RescueWakesClaimer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		table  string
		worker func(pool *pgxpool.Pool, ran *counter, cfg skipjack.WorkerConfig) runner
	}{
		{"fast", func(pool *pgxpool.Pool, ran *counter, cfg skipjack.WorkerConfig) runner {
			return fast.NewWorker(pool, func(ctx context.Context, j *fast.Job) error { return ran.handle(ctx, j.ID) }, cfg)
		}},
		// limits.concurrency claims in a transaction of its own; its
		// lease (30s) puts rescues 15s apart.
		{"capped", func(pool *pgxpool.Pool, ran *counter, cfg skipjack.WorkerConfig) runner {
			return capped.NewWorker(pool, func(ctx context.Context, j *capped.Job) error { return ran.handle(ctx, j.ID) }, cfg)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			ctx := context.Background()
			claims := newClaimClock()
			var ran counter
			start(t, tt.worker(pool, &ran, skipjack.WorkerConfig{Concurrency: 2, PollInterval: neverPoll, Hooks: claims, Logger: quietLogger(t)}))
			waitFor(t, 30*time.Second, "the worker's first claim", func() bool { return claims.count() > 0 })
			// A job of a worker that died (it has no row in the workers
			// table), its lease not lapsed yet.
			if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO skipjack.%q (payload, state, attempt, claim, lease_expires_at, worker)
				VALUES ('{"n": 1}', 'running', 1, 1, now() + interval '1 hour', 'dead/1')`, tt.table)); err != nil {
				t.Fatal(err)
			}
			inserted := time.Now()
			wakeUntil(t, pool, tt.table, "a claim after the insert", func() bool { return claims.since(inserted) > 0 })
			if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE skipjack.%q SET lease_expires_at = now() - interval '1 second'`, tt.table)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "the rescued job to run (the worker polls once an hour)", func() bool { return ran.n.Load() == 1 })
		})
	}
}

// TestGate3DoubtStopsClaims checks that a worker that cannot prove it is
// alive (its renewals of its workers-table row hang) claims nothing: jobs
// enqueued while it doubts, which notify it and which its 100ms polls find,
// stay unclaimed until its worker row has expired in the database; once it
// proves itself alive again it runs them.
func TestGate3DoubtStopsClaims(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	cancelled := make(chan error, 1)
	var ran counter
	var first atomic.Bool
	start(t, slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		if first.CompareAndSwap(false, true) {
			<-hctx.Done()
			cancelled <- context.Cause(hctx)
			return hctx.Err()
		}
		return ran.handle(hctx, job.ID)
	}, skipjack.WorkerConfig{Concurrency: 3, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	if _, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the first job to run", func() bool { return first.Load() })
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE skipjack._skipjack_workers IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-cancelled:
		if !errors.Is(cause, skipjack.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not doubt its liveness within 30s of a 3s lease")
	}
	var firstID int64
	if err := tx.QueryRow(ctx, `SELECT max(id) FROM skipjack.slow`).Scan(&firstID); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.EnqueueMany(ctx, pool, make([]slow.Payload, 3)); err != nil {
		t.Fatal(err)
	}
	// The worker doubts from lease-lease/3 (2s) after its last proof; its
	// row expires in the database at the lease (3s): its polls and the
	// enqueue's notification came meanwhile.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var expired bool
		if err := tx.QueryRow(ctx, `SELECT bool_and(expires_at < clock_timestamp() - interval '500 milliseconds') FROM skipjack._skipjack_workers`).Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker's row did not expire in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var claimed int64
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM skipjack.slow WHERE id > $1 AND claim > 0`, firstID).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 || ran.n.Load() != 0 {
		t.Fatalf("a worker in lease doubt claimed %d jobs (ran %d), want 0", claimed, ran.n.Load())
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the jobs to run once the worker proved itself alive", func() bool { return ran.n.Load() >= 3 })
}

// TestGate3CleanStopIsNotACrash checks that a worker that stops cleanly
// does not count a rescue against the jobs it leaves behind (a handler that
// ignored shutdown): Run marks its workers-table row stopped, so the
// job's rescue, by another worker once its lease lapsed, leaves its rescues
// at 0 and never makes it a suspect.
func TestGate3CleanStopIsNotACrash(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	hang := make(chan struct{})
	defer close(hang)
	started := make(chan int64, 1)
	var once sync.Once
	w := slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		once.Do(func() { started <- job.ID })
		<-hang // ignores its cancelled context
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, ShutdownTimeout: 200 * time.Millisecond, Logger: quietLogger(t)})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	id, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not start")
	}
	stop()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(id)) {
			t.Fatalf("Run returned %v, want an error naming the stuck job %d", err, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	rescues := make(chan int, 1)
	start(t, slow.NewWorker(pool, func(_ context.Context, job *slow.Job) error {
		select {
		case rescues <- job.Rescues:
		default:
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	select {
	case n := <-rescues:
		if n != 0 {
			t.Errorf("the job left by a clean stop ran again with %d rescues, want 0 (a clean stop is no crash)", n)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the job left behind was not rescued and run within 60s (lease 3s)")
	}
}

// TestGate3RunGroupStopsOnFailure checks that a worker whose Run fails in
// RunGroup (here: its database lacks the migrations) stops the rest of the
// group: RunGroup returns its error, with or without a shared cap, while
// its context is still live.
func TestGate3RunGroupStopsOnFailure(t *testing.T) {
	t.Parallel()
	for _, cfg := range []skipjack.GroupConfig{{Concurrency: 2}, {}} {
		t.Run(fmt.Sprintf("concurrency=%d", cfg.Concurrency), func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			bare := skipjacktest.NewPool(t) // no migrations
			good := demo.NewWorker(pool, func(context.Context, *demo.Job) error { return nil }, skipjack.WorkerConfig{Logger: quietLogger(t)})
			bad := demo.NewWorker(bare, func(context.Context, *demo.Job) error { return nil }, skipjack.WorkerConfig{Logger: quietLogger(t)})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- skipjack.RunGroup(ctx, cfg, good, bad) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "workers table is missing") {
					t.Errorf("RunGroup returned %v, want the failed worker's error", err)
				}
			case <-time.After(60 * time.Second):
				cancel()
				<-done
				t.Fatal("RunGroup kept the other workers running for 60s after one failed")
			}
		})
	}
}
