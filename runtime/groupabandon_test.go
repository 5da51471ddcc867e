package skipjack_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestRunGroupAbandonedHandlerGivesBackItsSlot runs a group with a budget
// of one handler: a fast job whose handler ignores its context and never
// returns (until the test ends), then a demo job. The demo job must wait
// while the hung handler's attempt lasts, and run once the worker abandons
// it, at fast's timeout plus its lease (500ms + 2s) after it started.
// Before, the hung handler kept the group's only slot for as long as it
// did not return, and no job of the group ran again.
func TestRunGroupAbandonedHandlerGivesBackItsSlot(t *testing.T) {
	t.Parallel()
	const timeout, lease = 500 * time.Millisecond, 2 * time.Second // fast's
	pool := newQueues(t, 8)
	ctx := context.Background()
	hang := make(chan struct{})
	hung := make(chan time.Time, 1)
	var first atomic.Bool
	hanging := fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		if first.CompareAndSwap(false, true) {
			hung <- time.Now()
			<-hang // ignores its context
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)})
	ran := make(chan time.Time, 1)
	other := demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		ran <- time.Now()
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)})

	enqueueFast(t, pool)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- skipjack.RunGroup(runCtx, skipjack.GroupConfig{Concurrency: 1}, hanging, other)
	}()
	t.Cleanup(func() {
		close(hang)
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunGroup returned %v, want nil", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("RunGroup did not return within a minute of cancellation")
		}
	})

	var hungAt time.Time
	select {
	case hungAt = <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("the fast job's handler did not start within 30s")
	}
	if _, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-ran:
		waited := at.Sub(hungAt)
		// The slot comes back when the attempt is abandoned, not sooner:
		// the budget holds while the attempt may still be running.
		if waited < timeout+lease-200*time.Millisecond {
			t.Errorf("the other job ran %v after the hung handler started, before its abandonment at %v: the budget of 1 was exceeded",
				waited.Round(time.Millisecond), timeout+lease)
		} else {
			t.Logf("the other job ran %v after the hung handler started (abandoned at %v)", waited.Round(time.Millisecond), timeout+lease)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the other job did not run within 30s of the hung handler's start (abandonment due after %v): the hung handler kept the group's only slot", timeout+lease)
	}
}
