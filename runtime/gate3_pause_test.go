package skipjack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestGate3PauseHoldsEveryClaimVariant checks Pause and Resume on every
// claim variant (unlimited, limits.concurrency, limits.rate, serial.by,
// limits.per_key) through both Resume paths (the generated function and
// QueueAdmin's):
// jobs enqueued while the queue is paused are not claimed by a claim that
// certainly read them (it started after their enqueue committed, woken by
// its notification), and Resume wakes the worker, whose poll interval is
// an hour, so that they run at once.
//
// Before, only the unlimited claim was checked (TestPauseResume): a limited
// claim that ignored the pause flag passed every test but the golden files,
// and so did a Resume that cleared the flag without notifying the workers.
func TestGate3PauseHoldsEveryClaimVariant(t *testing.T) {
	t.Parallel()
	for _, v := range variants() {
		for _, path := range []string{"generated", "admin"} {
			t.Run(v.name+"/"+path, func(t *testing.T) {
				t.Parallel()
				pool := newQueues(t, 10)
				ctx := context.Background()
				claims := newClaimClock()
				var ran counter
				start(t, v.worker(pool, ran.handle, skipjack.WorkerConfig{
					Concurrency: 5, PollInterval: neverPoll, Hooks: claims, Logger: quietLogger(t),
				}))
				waitFor(t, 30*time.Second, "the worker's first claim", func() bool { return claims.count() > 0 })
				if err := v.pause(ctx, pool); err != nil {
					t.Fatal(err)
				}
				const jobs = 3
				if err := v.enqueue(ctx, pool, jobs); err != nil {
					t.Fatalf("enqueue while paused: %v", err)
				}
				enqueued := time.Now()
				// The enqueue's notification wakes the claimer: a claim
				// that started after the enqueue committed read the jobs.
				wakeUntil(t, pool, v.table, "a claim after the enqueue", func() bool { return claims.since(enqueued) > 0 })
				if n := queryInt(t, pool, fmt.Sprintf(`SELECT count(*) FROM skipjack.%q WHERE claim > 0`, v.table)); n != 0 {
					t.Fatalf("%d jobs of the paused %s queue were claimed, want 0", n, v.name)
				}
				if n := ran.n.Load(); n != 0 {
					t.Fatalf("%d jobs of the paused %s queue ran, want 0", n, v.name)
				}
				st, err := v.admin(pool).Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Paused || st.Pending != jobs {
					t.Errorf("Stats while paused = %+v, want Paused and %d pending", st, jobs)
				}
				resume := v.resume
				if path == "admin" {
					resume = func(ctx context.Context, _ skipjack.DBTX) error { return v.admin(pool).Resume(ctx) }
				}
				if err := resume(ctx, pool); err != nil {
					t.Fatal(err)
				}
				// Only Resume's notification can wake the worker before its
				// next poll, an hour away.
				waitFor(t, 30*time.Second, "the jobs to run after Resume woke the worker", func() bool { return ran.n.Load() == jobs })
			})
		}
	}
}
