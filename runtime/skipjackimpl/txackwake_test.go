package skipjackimpl

import (
	"context"
	"fmt"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestTxAckedEndWakesLimitedClaimer checks that the end of a handler whose
// CompleteTx acknowledged its job wakes the claimer of a queue whose
// claims wait for settled jobs (limits or a serial key) at once: the row
// was most likely settled in the handler's transaction, so the jobs it
// held back are claimable now, long before the flush of its (then
// unmatched) acknowledgement, which AckDelay puts off. Other ends leave
// the wake to the flush. TestLimitedQueueWithCompleteTx measures the
// effect against Postgres; this holds the decision itself, which load
// cannot blur.
func TestTxAckedEndWakesLimitedClaimer(t *testing.T) {
	t.Parallel()
	specs := map[string]QueueSpec{
		"unlimited":   {},
		"concurrency": {LimitConcurrency: 3},
		"rate":        {RateCount: 50, RatePer: time.Second},
		"per key":     {PerKeyConcurrency: 1},
		"serial":      {Serial: true},
	}
	for name, spec := range specs {
		for _, tc := range []struct {
			txAcked, completed bool
		}{{true, true}, {true, false}, {false, true}, {false, false}} {
			spec, tc := spec, tc
			want := tc.txAcked && tc.completed && name != "unlimited"
			t.Run(fmt.Sprintf("%s/txacked=%v/completed=%v", name, tc.txAcked, tc.completed), func(t *testing.T) {
				t.Parallel()
				spec.Name, spec.Lease = "fake", 3*time.Second
				w := newWorker(lazyPool(t), spec, &fakeStore{},
					func(context.Context, *skipjack.Job[struct{}]) error { return nil },
					skipjack.WorkerConfig{Concurrency: 3, Logger: discardLogger()})
				r := newRunner(w)
				e := &entry[struct{}]{row: ClaimedRow{ID: 1, Claim: 1}}
				e.txAcked.Store(tc.txAcked)
				r.mu.Lock()
				r.held[1] = e
				r.inflight = 1
				r.mu.Unlock()
				r.finishAt(e, Resolution{}, tc.completed, time.Now())
				woke := false
				select {
				case <-r.claimable:
					woke = true
				default:
				}
				if woke != want {
					t.Errorf("CompleteTx acknowledged %v, completed %v: claimer woken %v, want %v", tc.txAcked, tc.completed, woke, want)
				}
			})
		}
	}
}
