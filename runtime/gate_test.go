package skipjack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestRetryBackoffGrows fails the fifth attempt of a demo job (backoff 1s
// to 1h) and reads the delay the worker sent from the row: run_at minus the
// time of the recorded error, both set by the same statement. Exponential
// backoff with equal jitter puts the delay after attempt 5 in [8s, 16s];
// a backoff stuck at its minimum would give 1s.
func TestRetryBackoffGrows(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO skipjack.demo (payload, attempt, max_attempts) VALUES ('{"n": 1}', 4, 10) RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		return errors.New("still failing")
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "attempt 5 to fail", func() bool {
		row, ok := getJob(t, pool, "demo", id)
		return ok && row.State == "pending" && row.Attempt == 5
	})
	var delay time.Duration
	if err := pool.QueryRow(ctx, `SELECT run_at - (errors->-1->>'at')::timestamptz FROM skipjack.demo WHERE id = $1`, id).Scan(&delay); err != nil {
		t.Fatal(err)
	}
	if delay < 8*time.Second || delay > 16*time.Second {
		t.Errorf("retry delay after attempt 5 = %v, want within [8s, 16s] (1s doubled four times, equal jitter)", delay)
	}
}

// TestRetryWakesWorker fails a fast job (backoff 10ms to 50ms) once on a
// worker that polls only every 10s: retries send no notification, so the
// worker must wake itself when the retry is due, well before its next poll.
func TestRetryWakesWorker(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	calls := make(chan time.Time, 2)
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		calls <- time.Now()
		if job.Attempt == 1 {
			return errors.New("once")
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 10 * time.Second, Logger: quietLogger(t)}))
	enqueueFast(t, pool)
	var first time.Time
	select {
	case first = <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	select {
	case second := <-calls:
		if gap := second.Sub(first); gap > 2*time.Second {
			t.Errorf("retry ran %v after the failure, want within 2s (backoff ≤ 50ms)", gap)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the retry did not run within 5s; the worker waited for its 10s poll")
	}
}
