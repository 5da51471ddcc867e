package skipjacktest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// migrated returns a pool on a fresh database with the test queues.
func migrated(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := skipjacktest.NewPool(t)
	if err := testqueue.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// fatalT records the first Fatalf and ends the goroutine, as testing.T
// does, so tests can check that a helper fails and what it says.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs f with a fatalT and returns its failure message, failing t
// when f did not fail.
func failure(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	ft := &fatalT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ft)
	}()
	<-done
	if ft.msg == "" {
		t.Fatal("the helper did not fail the test")
	}
	return ft.msg
}

// TestRequireEnqueuedInTransaction enqueues inside a transaction and
// checks that the helpers see the jobs on the transaction, not outside it
// before the commit, and that a job that is not there fails the test with
// a message listing what is.
func TestRequireEnqueuedInTransaction(t *testing.T) {
	t.Parallel()
	pool := migrated(t)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for i, label := range []string{"welcome", "reminder"} {
		if _, err := demo.Enqueue(t.Context(), tx, demo.Payload{N: int64(i + 1), Label: label}, skipjack.Delay(time.Hour)); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}

	got := skipjacktest.RequireEnqueued(t, tx, demo.List, func(r *demo.Record) bool { return r.Payload.Label == "reminder" })
	if len(got) != 1 || got[0].Payload.N != 2 || got[0].State != skipjack.StatePending || !got[0].RunAt.After(time.Now().Add(50*time.Minute)) {
		t.Errorf("RequireEnqueued = %+v, want the one pending reminder job an hour out", got)
	}
	if all := skipjacktest.Jobs(t, tx, demo.List, nil); len(all) != 2 {
		t.Errorf("Jobs(nil) = %d jobs, want 2", len(all))
	}
	skipjacktest.RequireNotEnqueued(t, pool, demo.List, nil) // not committed

	msg := failure(t, func(tb testing.TB) {
		skipjacktest.RequireEnqueued(tb, tx, demo.List, func(r *demo.Record) bool { return r.Payload.Label == "goodbye" })
	})
	for _, want := range []string{"no demo.Payload job matches", "the queue holds 2:", `{"n":1,"label":"welcome"}`, "pending"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message %q does not contain %q", msg, want)
		}
	}
	msg = failure(t, func(tb testing.TB) {
		skipjacktest.RequireNotEnqueued(tb, tx, demo.List, func(r *demo.Record) bool { return r.Payload.N == 1 })
	})
	if !strings.Contains(msg, "1 match") || !strings.Contains(msg, "welcome") {
		t.Errorf("RequireNotEnqueued failure %q, want it to name the matching welcome job", msg)
	}

	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	skipjacktest.RequireEnqueued(t, pool, demo.List, func(r *demo.Record) bool { return r.Payload.Label == "welcome" })
}

// TestJobsPages checks that Jobs reads past List's page size.
func TestJobsPages(t *testing.T) {
	t.Parallel()
	pool := migrated(t)
	ps := make([]demo.Payload, 2500)
	for i := range ps {
		ps[i] = demo.Payload{N: int64(i)}
	}
	if _, err := demo.EnqueueMany(t.Context(), pool, ps); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	odd := skipjacktest.Jobs(t, pool, demo.List, func(r *demo.Record) bool { return r.Payload.N%2 == 1 })
	if len(odd) != 1250 || odd[0].Payload.N != 1 || odd[1249].Payload.N != 2499 {
		t.Errorf("Jobs found %d odd jobs, want 1250 from n=1 to n=2499", len(odd))
	}
}

// lossy has a field that does not survive the JSON round trip.
type lossy struct {
	Kept    string `json:"kept"`
	Dropped string `json:"-"`
}

// strict refuses to decode, as a payload written by an older version might.
type strict struct{ N int }

func (s *strict) UnmarshalJSON([]byte) error { return errors.New("no thanks") }

// endCounter counts JobEnd calls.
type endCounter struct {
	skipjack.NopHooks
	n atomic.Int32
}

func (h *endCounter) JobEnd(context.Context, skipjack.JobInfo, skipjack.AttemptResult) { h.n.Add(1) }

// TestRunJob runs each kind of handler result through RunJob with the fast
// queue's spec (max_attempts 3, backoff 10ms..50ms, timeout 500ms) and
// checks the outcome a worker would reach.
func TestRunJob(t *testing.T) {
	t.Parallel()
	p := fast.Payload{N: 7, Label: "grüße"}
	tests := []struct {
		name   string
		handle func(ctx context.Context, job *fast.Job) error
		opts   []skipjacktest.RunOption
		check  func(t *testing.T, res skipjacktest.Result[fast.Payload])
	}{{
		name:   "completed with the decoded payload",
		handle: func(ctx context.Context, job *fast.Job) error { return nil },
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeCompleted || res.Err != nil || res.Job.Payload != p || res.Job.Attempt != 1 || res.Job.MaxAttempts != 3 {
				t.Errorf("got %+v with job %+v, want completed, payload %+v, attempt 1 of 3", res, res.Job, p)
			}
		},
	}, {
		name:   "error retried with the queue's backoff",
		handle: func(ctx context.Context, job *fast.Job) error { return errors.New("boom") },
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeRetried || res.Delay < 10*time.Millisecond || res.Delay > 50*time.Millisecond || res.Err.Error() != "boom" {
				t.Errorf("got %+v, want retried after 10ms..50ms with error boom", res)
			}
		},
	}, {
		name:   "error on the last attempt fails",
		handle: func(ctx context.Context, job *fast.Job) error { return errors.New("boom") },
		opts:   []skipjacktest.RunOption{skipjacktest.Attempt(3)},
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeFailed || res.Job.Attempt != 3 {
				t.Errorf("got %+v at attempt %d, want failed at attempt 3", res, res.Job.Attempt)
			}
		},
	}, {
		name: "permanent fails at once",
		handle: func(ctx context.Context, job *fast.Job) error {
			return fmt.Errorf("wrapped: %w", skipjack.Permanent(errors.New("bad input")))
		},
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeFailed || res.Err.Error() != "wrapped: bad input" {
				t.Errorf("got %+v, want failed with wrapped: bad input", res)
			}
		},
	}, {
		name:   "snooze clamped to the poll interval",
		handle: func(ctx context.Context, job *fast.Job) error { return skipjack.Snooze(time.Millisecond) },
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeSnoozed || res.Delay != time.Second {
				t.Errorf("got %+v, want snoozed for the default 1s poll interval", res)
			}
		},
	}, {
		name:   "snooze under a worker config",
		handle: func(ctx context.Context, job *fast.Job) error { return skipjack.Snooze(time.Minute) },
		opts:   []skipjacktest.RunOption{skipjacktest.WorkerConfig(skipjack.WorkerConfig{PollInterval: 10 * time.Millisecond})},
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeSnoozed || res.Delay != time.Minute {
				t.Errorf("got %+v, want snoozed for a minute", res)
			}
		},
	}, {
		name:   "panic recovered and retried",
		handle: func(ctx context.Context, job *fast.Job) error { panic("kaboom") },
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			if res.Outcome != skipjack.OutcomeRetried || res.Panic == nil || res.Panic.Value != "kaboom" || !strings.Contains(string(res.Panic.Stack), "jobs_test.go") {
				t.Errorf("got %+v, want retried with the recovered kaboom and its stack", res)
			}
		},
	}, {
		name: "timeout",
		handle: func(ctx context.Context, job *fast.Job) error {
			<-ctx.Done()
			return ctx.Err()
		},
		check: func(t *testing.T, res skipjacktest.Result[fast.Payload]) {
			// The deadline is set just before the handler's clock starts,
			// so Took may fall short of 500ms by that gap (0.3ms seen).
			if res.Outcome != skipjack.OutcomeRetried || !strings.Contains(res.Err.Error(), "overran its 500ms timeout") || res.Took < 495*time.Millisecond {
				t.Errorf("got %+v, want retried after overrunning the 500ms timeout", res)
			}
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, skipjacktest.RunJob(t, fast.Spec, tc.handle, p, tc.opts...))
		})
	}
}

// TestRunJobPayloadPath checks that the handler sees the payload after the
// JSON round trip a real job takes, that a payload that does not decode
// fails the job as a worker would, that one Enqueue would refuse fails the
// test, and that hooks in the worker config are called.
func TestRunJobPayloadPath(t *testing.T) {
	t.Parallel()
	spec := skipjackimpl.QueueSpec{Name: "lossy", MaxAttempts: 5, MaxPayloadBytes: 64}
	hooks := &endCounter{}
	cfg := skipjacktest.WorkerConfig(skipjack.WorkerConfig{Hooks: hooks})

	var seen lossy
	res := skipjacktest.RunJob(t, spec, func(ctx context.Context, job *skipjack.Job[lossy]) error {
		seen = job.Payload
		return nil
	}, lossy{Kept: "a", Dropped: "b"}, cfg)
	if res.Outcome != skipjack.OutcomeCompleted || seen != (lossy{Kept: "a"}) {
		t.Errorf("got %s, handler saw %+v; want completed with only the JSON fields", res.Outcome, seen)
	}
	if n := hooks.n.Load(); n != 1 {
		t.Errorf("JobEnd hook called %d times, want 1", n)
	}

	ran := false
	bad := skipjacktest.RunJob(t, skipjackimpl.QueueSpec{Name: "strict"}, func(ctx context.Context, job *skipjack.Job[strict]) error {
		ran = true
		return nil
	}, strict{N: 1})
	if ran || bad.Outcome != skipjack.OutcomeFailed || !strings.Contains(fmt.Sprint(bad.Err), "decode payload: no thanks") {
		t.Errorf("undecodable payload: ran=%v, %+v; want failed with the decode error, handler not run", ran, bad)
	}

	nop := func(ctx context.Context, job *skipjack.Job[lossy]) error { return nil }
	if msg := failure(t, func(tb testing.TB) { skipjacktest.RunJob(tb, spec, nop, lossy{Kept: "nul\x00"}) }); !strings.Contains(msg, "NUL") {
		t.Errorf("NUL payload failure %q, want it to name the NUL character", msg)
	}
	if msg := failure(t, func(tb testing.TB) { skipjacktest.RunJob(tb, spec, nop, lossy{Kept: strings.Repeat("x", 100)}) }); !strings.Contains(msg, "max_payload_bytes") {
		t.Errorf("oversized payload failure %q, want it to name max_payload_bytes", msg)
	}
}
