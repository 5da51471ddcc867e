package skipjack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
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
