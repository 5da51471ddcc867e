package skipjack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestErrorHistoryKeepsLast10 checks the documented bound of a job's error
// history: after more than 10 failed attempts only the last 10 remain,
// oldest first.
func TestErrorHistoryKeepsLast10(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	ctx := context.Background()
	history := make([]skipjack.AttemptError, 10)
	for i := range history {
		history[i] = skipjack.AttemptError{Attempt: i + 1, At: time.Now(), Error: fmt.Sprintf("old %d", i+1), Worker: "w"}
	}
	seeded, err := json.Marshal(history)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := pool.QueryRow(ctx, `INSERT INTO skipjack.fast (payload, attempt, max_attempts, errors)
		VALUES ('{"n":1}', 10, 20, $1) RETURNING id`, seeded).Scan(&id); err != nil {
		t.Fatal(err)
	}
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		return fmt.Errorf("new %d", job.Attempt)
	}, skipjack.WorkerConfig{Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)}))
	waitFor(t, 20*time.Second, "two more failed attempts", func() bool {
		return queryInt(t, pool, `SELECT coalesce(max(attempt), 0) FROM skipjack.fast WHERE id = $1 AND state <> 'running'`, id) >= 12
	})
	row, ok := getJob(t, pool, "fast", id)
	if !ok {
		t.Fatal("job is gone")
	}
	if len(row.Errors) != 10 {
		t.Fatalf("%d errors kept, want 10", len(row.Errors))
	}
	if first := row.Errors[0]; first.Attempt != 3 || first.Error != "old 3" {
		t.Errorf("oldest kept error = %+v, want attempt 3 (the two oldest dropped)", first)
	}
	if last := row.Errors[9]; last.Error != fmt.Sprintf("new %d", last.Attempt) || last.Attempt < 12 {
		t.Errorf("newest error = %+v, want the latest attempt's", last)
	}
}

// TestFailedAfterFiveRescues checks the documented rescue limit: a job
// whose lease lapsed is made pending again (attempt restored) until it has
// been rescued 5 times; the next lapse fails it with "lease lost".
func TestFailedAfterFiveRescues(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	ctx := context.Background()
	insert := func(rescues int) int64 {
		t.Helper()
		var id int64
		err := pool.QueryRow(ctx, `INSERT INTO skipjack.fast (payload, state, attempt, claim, rescues, lease_expires_at, worker)
			VALUES ('{"n":1}', 'running', 1, 1, $1, now() - interval '1 minute', 'dead') RETURNING id`, rescues).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	fifth, sixth := insert(4), insert(5)
	ran := make(chan int64, 4)
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		ran <- job.ID
		return errors.New("keep it")
	}, skipjack.WorkerConfig{Concurrency: 2, Logger: quietLogger(t)}))

	select {
	case got := <-ran:
		if got != fifth {
			t.Errorf("job %d ran after its rescue, want only job %d (rescued the 5th time)", got, fifth)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the job rescued for the 5th time did not run again")
	}
	waitFor(t, 20*time.Second, "the 6th lapse to fail its job", func() bool {
		r, ok := getJob(t, pool, "fast", sixth)
		return ok && r.State == "failed"
	})
	r, _ := getJob(t, pool, "fast", sixth)
	if r.Rescues != 6 || len(r.Errors) == 0 || r.Errors[len(r.Errors)-1].Error != "lease lost" {
		t.Errorf("job rescued a 6th time: rescues %d, errors %+v; want 6 and a last error \"lease lost\"", r.Rescues, r.Errors)
	}
	if r.Attempt != 1 {
		t.Errorf("failed job's attempt = %d, want 1 (not restored when failed)", r.Attempt)
	}
}

// TestPoolWarning checks the documented start-up warning when the pool
// handlers share is smaller than the workers' Concurrency.
func TestPoolWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		maxConns    int32
		concurrency int
		warn        bool
	}{
		{"pool smaller than Concurrency", 4, 10, true},
		{"pool fits", 12, 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, tc.maxConns)
			logs := newLogs(t)
			claimed := make(chan struct{}, 1)
			if _, err := fast.Enqueue(context.Background(), pool, fast.Payload{N: 1}); err != nil {
				t.Fatal(err)
			}
			stop := start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
				claimed <- struct{}{}
				return nil
			}, skipjack.WorkerConfig{Concurrency: tc.concurrency, Logger: logs.logger()}))
			<-claimed // the check runs before the first claim
			stop()
			if got := logs.contains("WARN", "connection pool is smaller"); got != tc.warn {
				t.Errorf("warned = %v, want %v; logs:\n%s", got, tc.warn, logs)
			}
		})
	}
}
