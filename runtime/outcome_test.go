package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// call is one handler invocation as a test records it.
type call struct {
	at       time.Time
	attempt  int
	rescues  int
	errors   []skipjack.AttemptError
	deadline time.Duration // until the ctx deadline, at start
}

// recorder records handler invocations.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) record(ctx context.Context, job *fast.Job) int {
	c := call{at: time.Now(), attempt: job.Attempt, rescues: job.Rescues, errors: job.Errors}
	if d, ok := ctx.Deadline(); ok {
		c.deadline = time.Until(d)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	return len(r.calls)
}

func (r *recorder) get() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// enqueueFast inserts one fast job.
func enqueueFast(t testing.TB, db fast.DBTX) int64 {
	t.Helper()
	id, err := fast.Enqueue(context.Background(), db, fast.Payload{N: 1, Label: "x"})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return id
}

// TestOutcomes checks what each kind of handler result does to a job of the
// fast queue (max_attempts 3, backoff 10ms..50ms, timeout 500ms).
func TestOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// handle is the handler; n counts its calls from 1.
		handle func(ctx context.Context, n int, job *fast.Job) error
		// insert enqueues the job (default enqueueFast).
		insert func(t *testing.T, db fast.DBTX) int64
		// failed says the job ends failed (else completed and deleted).
		failed bool
		calls  int
		check  func(t *testing.T, calls []call, row jobRow, logs *logs)
	}{{
		name: "retry then fail after max_attempts",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			return fmt.Errorf("boom %d", n)
		},
		failed: true,
		calls:  3,
		check: func(t *testing.T, calls []call, row jobRow, _ *logs) {
			for i, c := range calls {
				if c.attempt != i+1 {
					t.Errorf("call %d saw attempt %d, want %d", i+1, c.attempt, i+1)
				}
				if i == 0 {
					continue
				}
				// Backoff is 10ms..50ms; the worker wakes itself when its
				// retry is due instead of waiting for the 1s poll.
				if gap := c.at.Sub(calls[i-1].at); gap < 10*time.Millisecond || gap > 700*time.Millisecond {
					t.Errorf("gap before attempt %d = %v, want within [10ms, 700ms]", i+1, gap)
				}
			}
			if row.Attempt != 3 || len(row.Errors) != 3 {
				t.Fatalf("row attempt %d with %d errors, want 3 and 3", row.Attempt, len(row.Errors))
			}
			for i, e := range row.Errors {
				if e.Attempt != i+1 || e.Error != fmt.Sprintf("boom %d", i+1) || e.Worker == "" || e.At.IsZero() {
					t.Errorf("errors[%d] = %+v, want attempt %d, error boom %d, a worker and a time", i, e, i+1, i+1)
				}
			}
		},
	}, {
		name: "permanent fails at once",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			return fmt.Errorf("wrapped: %w", skipjack.Permanent(errors.New("bad input")))
		},
		failed: true,
		calls:  1,
		check: func(t *testing.T, calls []call, row jobRow, _ *logs) {
			if len(row.Errors) != 1 || row.Errors[0].Error != "wrapped: bad input" {
				t.Errorf("errors = %+v, want one: wrapped: bad input", row.Errors)
			}
		},
	}, {
		name: "snooze does not count the attempt",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			if n == 1 {
				return fmt.Errorf("not yet: %w", skipjack.Snooze(time.Millisecond))
			}
			return nil
		},
		calls: 2,
		check: func(t *testing.T, calls []call, _ jobRow, _ *logs) {
			if calls[1].attempt != 1 {
				t.Errorf("attempt after snooze = %d, want 1", calls[1].attempt)
			}
			if len(calls[1].errors) != 0 {
				t.Errorf("errors after snooze = %+v, want none", calls[1].errors)
			}
			// Snooze(1ms) is clamped to the poll interval (200ms here).
			if gap := calls[1].at.Sub(calls[0].at); gap < 200*time.Millisecond {
				t.Errorf("snoozed for %v, want at least the 200ms poll interval", gap)
			}
		},
	}, {
		name: "panic is recovered, logged and retried",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			if n == 1 {
				panic("kaboom")
			}
			return nil
		},
		calls: 2,
		check: func(t *testing.T, calls []call, _ jobRow, logs *logs) {
			if calls[1].attempt != 2 || len(calls[1].errors) != 1 || calls[1].errors[0].Error != "panic: kaboom" {
				t.Errorf("second call: attempt %d, errors %+v; want attempt 2 after error panic: kaboom", calls[1].attempt, calls[1].errors)
			}
			if !logs.contains("ERROR", "handler panicked") || !strings.Contains(logs.String(), "outcome_test.go") {
				t.Errorf("no Error record with the panic's stack; logs:\n%s", logs)
			}
		},
	}, {
		name: "timeout cancels the handler context",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			if n == 1 {
				<-ctx.Done()
				return fmt.Errorf("%w (is DeadlineExceeded: %v)", ctx.Err(), errors.Is(ctx.Err(), context.DeadlineExceeded))
			}
			return nil
		},
		calls: 2,
		check: func(t *testing.T, calls []call, _ jobRow, _ *logs) {
			if d := calls[0].deadline; d <= 0 || d > 500*time.Millisecond {
				t.Errorf("handler deadline %v away, want within the queue's 500ms timeout", d)
			}
			if e := calls[1].errors; len(e) != 1 || !strings.Contains(e[0].Error, "is DeadlineExceeded: true") {
				t.Errorf("errors after timeout = %+v, want the handler's ctx.Err() to be context.DeadlineExceeded", e)
			}
			if e := calls[1].errors; len(e) != 1 || !strings.Contains(e[0].Error, "overran its 500ms timeout") {
				t.Errorf("errors after timeout = %+v, want one about the 500ms timeout", e)
			}
		},
	}, {
		name: "overrunning the timeout counts as failure even with nil",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			if n == 1 {
				time.Sleep(600 * time.Millisecond)
			}
			return nil
		},
		calls: 2,
		check: func(t *testing.T, calls []call, _ jobRow, _ *logs) {
			if calls[1].attempt != 2 {
				t.Errorf("attempt after an overrun = %d, want 2", calls[1].attempt)
			}
		},
	}, {
		name: "undecodable payload fails at once",
		handle: func(ctx context.Context, n int, job *fast.Job) error {
			return nil
		},
		insert: func(t *testing.T, db fast.DBTX) int64 {
			var id int64
			err := db.QueryRow(context.Background(), `INSERT INTO skipjack.fast (payload) VALUES ('{"n": "not a number"}') RETURNING id`).Scan(&id)
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			return id
		},
		failed: true,
		calls:  0,
		check: func(t *testing.T, _ []call, row jobRow, _ *logs) {
			if row.Attempt != 1 || len(row.Errors) != 1 || !strings.Contains(row.Errors[0].Error, "decode payload") {
				t.Errorf("row = %+v, want failed at attempt 1 with a decode payload error", row)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 6)
			insert := tc.insert
			if insert == nil {
				insert = func(t *testing.T, db fast.DBTX) int64 { return enqueueFast(t, db) }
			}
			rec := &recorder{}
			logs := newLogs(t)
			stop := start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
				return tc.handle(ctx, rec.record(ctx, job), job)
			}, skipjack.WorkerConfig{Concurrency: 2, PollInterval: 200 * time.Millisecond, Logger: logs.logger()}))
			id := insert(t, pool)

			var row jobRow
			waitFor(t, 20*time.Second, "the job to finish", func() bool {
				var ok bool
				row, ok = getJob(t, pool, "fast", id)
				return !ok || row.State == "failed"
			})
			if got := row.State == "failed"; got != tc.failed {
				t.Fatalf("job ended failed=%v (row %+v), want failed=%v", got, row, tc.failed)
			}
			stop() // every handler has returned when Run does
			calls := rec.get()
			if len(calls) != tc.calls {
				t.Fatalf("handler ran %d times, want %d", len(calls), tc.calls)
			}
			tc.check(t, calls, row, logs)
		})
	}
}
