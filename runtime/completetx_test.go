package skipjack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestCompleteTx checks that CompleteTx commits the handler's writes and
// the acknowledgement together: on commit the job is not acknowledged a
// second time, on rollback it is retried.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// rollbackFirst makes attempt 1 roll back and return an error.
		rollbackFirst bool
		wantAttempts  int
	}{
		{name: "commit", wantAttempts: 1},
		{name: "rollback retries", rollbackFirst: true, wantAttempts: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 8)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `CREATE TABLE side (job_id bigint, attempt int)`); err != nil {
				t.Fatal(err)
			}
			logs := newLogs(t)
			rec := newTally()
			stop := start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
				rec.add(job.ID)
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO side VALUES ($1, $2)`, job.ID, job.Attempt); err != nil {
					return err
				}
				if err := demo.CompleteTx(ctx, tx, job); err != nil {
					return err
				}
				if tc.rollbackFirst && job.Attempt == 1 {
					return errors.New("changed my mind") // deferred Rollback
				}
				return tx.Commit(ctx)
			}, skipjack.WorkerConfig{Concurrency: 2, Logger: logs.logger()}))
			id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
			if err != nil {
				t.Fatal(err)
			}
			// A rollback retries after demo's 1s minimum backoff.
			waitFor(t, 15*time.Second, "the job to complete", func() bool {
				_, ok := getJob(t, pool, "demo", id)
				return !ok
			})
			stop() // Run returns after flushing every result: a second acknowledgement is logged by now
			if n := queryInt(t, pool, `SELECT count(*) FROM side`); n != 1 {
				t.Errorf("%d side rows committed, want 1", n)
			}
			if n := queryInt(t, pool, `SELECT max(attempt) FROM side`); n != int64(tc.wantAttempts) {
				t.Errorf("the committed side row is from attempt %d, want %d", n, tc.wantAttempts)
			}
			if logs.contains("WARN", "matched no running attempt") {
				t.Errorf("the worker acknowledged a job CompleteTx had acknowledged; logs:\n%s", logs)
			}
		})
	}
}

// TestCompleteTxNotOwned checks that CompleteTx refuses a job this attempt
// does not own.
func TestCompleteTxNotOwned(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := demo.CompleteTx(ctx, tx, &demo.Job{ID: id}); !errors.Is(err, skipjack.ErrLeaseLost) {
		t.Errorf("CompleteTx of an unclaimed job = %v, want ErrLeaseLost", err)
	}
}

// TestCompleteTxEveryOutcome runs, on a queue limited to 3 running jobs,
// 4 jobs whose handlers each call CompleteTx at their first attempt and
// then commit or roll back, and return nil, an error or panic. Whatever
// they do, every job must end within a lease (capped's is 30s): completed
// when CompleteTx committed or the handler returned nil, retried when the
// transaction rolled back and the handler failed (the second attempt
// commits). A job stranded running would also hold one of the queue's 3
// running places, so the fourth job would never start.
func TestCompleteTxEveryOutcome(t *testing.T) {
	t.Parallel()
	const jobs = 4 // one more than capped's limits.concurrency
	tests := []struct {
		name   string
		commit bool   // attempt 1 commits the transaction (else rolls it back)
		result string // what attempt 1's handler then does: "nil", "error" or "panic"
		// wantRuns is how many attempts each job runs; wantAttempt is the
		// attempt whose transaction committed (0: none did).
		wantRuns, wantAttempt int
	}{
		{name: "commit then nil", commit: true, result: "nil", wantRuns: 1, wantAttempt: 1},
		{name: "commit then error", commit: true, result: "error", wantRuns: 1, wantAttempt: 1},
		{name: "commit then panic", commit: true, result: "panic", wantRuns: 1, wantAttempt: 1},
		{name: "rollback then nil", result: "nil", wantRuns: 1, wantAttempt: 0},
		{name: "rollback then error", result: "error", wantRuns: 2, wantAttempt: 2},
		{name: "rollback then panic", result: "panic", wantRuns: 2, wantAttempt: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 8)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `CREATE TABLE side (job_id bigint, attempt int)`); err != nil {
				t.Fatal(err)
			}
			logs := newLogs(t)
			runs := newTally()
			stop := start(t, capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
				runs.add(job.ID)
				tx, err := pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, `INSERT INTO side VALUES ($1, $2)`, job.ID, job.Attempt); err != nil {
					return err
				}
				if err := capped.CompleteTx(ctx, tx, job); err != nil {
					return err
				}
				if job.Attempt > 1 {
					return tx.Commit(ctx)
				}
				if tc.commit {
					if err := tx.Commit(ctx); err != nil {
						return err
					}
				} else if err := tx.Rollback(ctx); err != nil {
					return err
				}
				switch tc.result {
				case "error":
					return errors.New("failed after CompleteTx")
				case "panic":
					panic("panicked after CompleteTx")
				}
				return nil
			}, skipjack.WorkerConfig{Concurrency: jobs, Logger: logs.logger()}))
			if n, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, jobs)); err != nil || n != jobs {
				t.Fatalf("EnqueueMany = %d, %v; want %d, nil", n, err, jobs)
			}
			waitFor(t, 30*time.Second, "every job to end (completed rows are deleted)", func() bool {
				return queryInt(t, pool, `SELECT count(*) FROM skipjack.capped`) == 0
			})
			stop()
			if runs.len() != jobs {
				t.Errorf("%d jobs ran, want %d", runs.len(), jobs)
			}
			for id, n := range runs.snapshot() {
				if n != tc.wantRuns {
					t.Errorf("job %d ran %d times, want %d", id, n, tc.wantRuns)
				}
			}
			wantSide := int64(jobs)
			if tc.wantAttempt == 0 {
				wantSide = 0
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM side`); n != wantSide {
				t.Errorf("%d side rows committed, want %d", n, wantSide)
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM side WHERE attempt <> $1`, tc.wantAttempt); wantSide > 0 && n != 0 {
				t.Errorf("%d side rows committed by an attempt other than %d", n, tc.wantAttempt)
			}
			if logs.contains("WARN", "matched no running attempt") {
				t.Errorf("the worker logged a result of a job CompleteTx settled as matching no attempt; logs:\n%s", logs)
			}
		})
	}
}
