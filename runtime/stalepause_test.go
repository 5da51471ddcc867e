package skipjack_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestStalePauseNoteStrandsNoJob checks that jobs a worker gives back
// because a pause was noted are claimed again when the queue is not
// paused after all: the note was stale (the queue was resumed before the
// worker acted on it) and the Resume's wake-up was spent already.
//
// That is, most likely, how TestGate3PauseHoldsEveryClaimVariant once
// timed out in CI (its log held only the timeout).
// A worker whose listener LISTENs after a Pause reads the pause state
// (pauseMissed); when that read and the Resume race, the Resume's wake-up
// starts a claim, and the pause the read found arrives while that claim
// is in flight, so the claim gives its jobs back. With nothing left to
// wake it, the worker's next claim was its next poll, an hour away here.
// Prefetched jobs that a stale note gives back were stranded the same way.
//
// The stale note is sent as Pause sends it, while the queue is not paused,
// at the moment each case needs it.
func TestStalePauseNoteStrandsNoJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// jobs are enqueued at once; the note is sent once all are
		// claimed, and the first has started when the jobs wait in
		// prefetch.
		jobs int
		// inFlight sends the note while the claim that took the jobs is
		// still in flight (after its statement, before it hands them
		// over); otherwise while they wait in prefetch behind a running
		// job.
		inFlight bool
		// noted is the log record that shows the worker acted on the note.
		noted string
	}{
		{name: "claim in flight", jobs: 1, inFlight: true, noted: "a pause was noted"},
		{name: "prefetched", jobs: 2, noted: "giving back the prefetched jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 10)
			ctx := context.Background()
			logs := newLogs(t)
			hold := &claimHold{claims: newClaimClock(), release: make(chan struct{}), holding: make(chan struct{})}
			hold.on.Store(tc.inFlight)
			running := make(chan struct{}, tc.jobs)
			finish := make(chan struct{})
			var ran atomic.Int64
			start(t, demo.NewWorker(pool, func(ctx context.Context, j *demo.Job) error {
				running <- struct{}{}
				<-finish
				ran.Add(1)
				return nil
			}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: neverPoll, Hooks: hold, Logger: logs.logger()}))
			// The first claim runs at start, the second when the listener
			// LISTENs: from then on, the enqueue's notification is the
			// only wake-up the worker has.
			waitFor(t, 30*time.Second, "the claim after the listener listened", func() bool { return hold.claims.count() >= 2 })
			if _, err := demo.EnqueueMany(ctx, pool, make([]demo.Payload, tc.jobs)); err != nil {
				t.Fatal(err)
			}
			if tc.inFlight {
				select {
				case <-hold.holding:
				case <-time.After(30 * time.Second):
					t.Fatal("timed out after 30s waiting for the claim of the job")
				}
			} else {
				select {
				case <-running:
				case <-time.After(30 * time.Second):
					t.Fatal("timed out after 30s waiting for the first job to start")
				}
				waitFor(t, 30*time.Second, "the claim of every job", func() bool { return hold.claims.jobCount() == tc.jobs })
			}
			if _, err := pool.Exec(ctx, `SELECT pg_notify('skipjack.demo', 'pause')`); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the worker to act on the pause note", func() bool { return logs.contains("DEBUG", tc.noted) || logs.contains("INFO", tc.noted) })
			close(finish)
			if tc.inFlight {
				close(hold.release)
			}
			waitFor(t, 30*time.Second, "every job to run after a stale pause note", func() bool { return ran.Load() == int64(tc.jobs) })
		})
	}
}

// claimHold is a ClaimHook that, while on, holds the first claim that took
// jobs inside its hook until release is closed; it counts claims with
// claims.
type claimHold struct {
	claims  *claimClock
	on      atomic.Bool
	once    sync.Once
	holding chan struct{} // closed when the held claim reached the hook
	release chan struct{}
}

// ClaimDone counts the claim, and holds it if it is the one to hold.
func (h *claimHold) ClaimDone(ci skipjack.ClaimInfo) {
	h.claims.ClaimDone(ci)
	if ci.Jobs == 0 || !h.on.Load() {
		return
	}
	held := false
	h.once.Do(func() { held = true })
	if held {
		close(h.holding)
		<-h.release
	}
}
