package skipjacktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// signUp is application code under test: it writes a user and enqueues
// their welcome job in one transaction.
func signUp(ctx context.Context, db demo.DBTX, name string) error {
	_, err := demo.Enqueue(ctx, db, demo.Payload{N: 1, Label: "welcome " + name}, skipjack.Delay(time.Minute))
	return err
}

// handleDemo is the queue's handler under test.
func handleDemo(ctx context.Context, job *demo.Job) error {
	if job.Payload.Label == "" {
		return skipjack.Permanent(errors.New("label is required"))
	}
	if job.Payload.N > 100 {
		return skipjack.Snooze(time.Minute)
	}
	return nil
}

// A test asserts that the code it calls enqueued a job, inside the test's
// own transaction, by passing the queue's generated List function.
func ExampleRequireEnqueued() {
	testSignUp := func(t *testing.T) {
		pool := skipjacktest.NewPool(t)
		if err := testqueue.Migrate(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.Background())

		if err := signUp(t.Context(), tx, "ada"); err != nil {
			t.Fatal(err)
		}
		skipjacktest.RequireEnqueued(t, tx, demo.List, func(r *demo.Record) bool {
			return r.Payload.Label == "welcome ada"
		})
	}
	_ = testSignUp // a func TestSignUp(t *testing.T) in a real test file
}

// A test runs a handler on one job synchronously, through the same
// encoding, timeout, panic recovery and outcome rules as a worker, by
// passing the queue's generated Spec.
func ExampleRunJob() {
	testHandler := func(t *testing.T) {
		res := skipjacktest.RunJob(t, demo.Spec, handleDemo, demo.Payload{N: 500, Label: "big"})
		if res.Outcome != skipjack.OutcomeSnoozed || res.Delay != time.Minute {
			t.Errorf("got %s after %v, want snoozed for a minute", res.Outcome, res.Delay)
		}
		res = skipjacktest.RunJob(t, demo.Spec, handleDemo, demo.Payload{N: 1})
		if res.Outcome != skipjack.OutcomeFailed {
			t.Errorf("got %s (%v), want failed at once", res.Outcome, res.Err)
		}
	}
	_ = testHandler // a func TestHandler(t *testing.T) in a real test file
}

// TestExamples runs the bodies the examples show.
func TestExamples(t *testing.T) {
	t.Parallel()
	pool := migrated(t)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := signUp(t.Context(), tx, "ada"); err != nil {
		t.Fatal(err)
	}
	skipjacktest.RequireEnqueued(t, tx, demo.List, func(r *demo.Record) bool { return r.Payload.Label == "welcome ada" })
	if res := skipjacktest.RunJob(t, demo.Spec, handleDemo, demo.Payload{N: 500, Label: "big"}); res.Outcome != skipjack.OutcomeSnoozed || res.Delay != time.Minute {
		t.Errorf("got %s after %v, want snoozed for a minute", res.Outcome, res.Delay)
	}
	if res := skipjacktest.RunJob(t, demo.Spec, handleDemo, demo.Payload{N: 1}); res.Outcome != skipjack.OutcomeFailed {
		t.Errorf("got %s (%v), want failed at once", res.Outcome, res.Err)
	}
}
