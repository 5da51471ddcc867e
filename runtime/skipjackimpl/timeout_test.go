package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestTimeoutListCancelsEachAtItsDeadline runs three handlers that wait for
// their contexts with a 200ms timeout. With two slots, the first two start
// together and the third when one of them ends, about 200ms later; with
// one slot they run one after another, so every attempt is added to an
// empty list and only the list's wake-up can arm the timer for it. Each
// must be cancelled 200ms after its own start (not at the first deadline,
// and not never), report that deadline, fail with context.DeadlineExceeded
// and carry the timeout as its cause.
func TestTimeoutListCancelsEachAtItsDeadline(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{2, 1} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) {
			t.Parallel()
			testTimeoutList(t, concurrency)
		})
	}
}

func testTimeoutList(t *testing.T, concurrency int) {
	const timeout = 200 * time.Millisecond
	type seen struct {
		waited, deadlineIn time.Duration
		err, cause         error
	}
	var mu sync.Mutex
	var calls []seen
	f := &fakeStore{pending: ids(3)}
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second, Timeout: timeout, BackoffMin: time.Hour},
		skipjack.WorkerConfig{Concurrency: concurrency},
		func(ctx context.Context, _ *skipjack.Job[struct{}]) error {
			start := time.Now()
			d, _ := ctx.Deadline()
			<-ctx.Done()
			mu.Lock()
			calls = append(calls, seen{waited: time.Since(start), deadlineIn: d.Sub(start), err: ctx.Err(), cause: context.Cause(ctx)})
			mu.Unlock()
			return ctx.Err()
		})
	waitFor(t, "three timed-out attempts to be resolved", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.resolves) == 3
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i, c := range calls {
		// Late by up to a second: a loaded machine (CI at load 6, -race)
		// cancelled one 180ms late. A list that is not woken for a new
		// deadline fires one timeout or more late, or never.
		if c.waited < timeout-10*time.Millisecond || c.waited > timeout+time.Second {
			t.Errorf("handler %d was cancelled %v after it started, want about %v", i, c.waited, timeout)
		}
		if c.deadlineIn <= 0 || c.deadlineIn > timeout {
			t.Errorf("handler %d saw its deadline %v after its start, want within %v", i, c.deadlineIn, timeout)
		}
		if !errors.Is(c.err, context.DeadlineExceeded) || c.cause != errTimeout {
			t.Errorf("handler %d: ctx.Err() = %v, cause %v; want context.DeadlineExceeded caused by the timeout", i, c.err, c.cause)
		}
	}
	for _, r := range f.resolves {
		if r.Action != ActionRetry {
			t.Errorf("timed-out attempt resolved as %+v, want a retry", r)
		}
	}
}
