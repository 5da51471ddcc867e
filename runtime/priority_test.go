package skipjack_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
)

// TestPriorityOrder enqueues jobs with priorities 9 down to 0, plus a job
// of the best priority scheduled for tomorrow, and works them with one
// handler: they run best priority first, and the future job does not run.
// Every claim takes the best jobs, but the worker keeps two claims in
// flight (one running, one prefetched), so two jobs claimed at the same
// moment may swap: a job never runs after one more than one priority worse.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	for p := 9; p >= 0; p-- {
		if _, err := ranked.Enqueue(ctx, pool, ranked.Payload{N: int64(p)}, skipjack.Priority(p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ranked.Enqueue(ctx, pool, ranked.Payload{N: -1}, skipjack.Priority(0), skipjack.Delay(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := ranked.Enqueue(ctx, pool, ranked.Payload{N: 1}, skipjack.Priority(10)); err == nil {
		t.Error("Enqueue with priority 10 succeeded, want an error (0..9)")
	}

	var mu sync.Mutex
	var order []int64
	w := ranked.NewWorker(pool, func(ctx context.Context, job *ranked.Job) error {
		mu.Lock()
		order = append(order, job.Payload.N)
		mu.Unlock()
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, BatchSize: 1, Logger: quietLogger(t)})
	stop := start(t, w)
	waitFor(t, 10*time.Second, "ten jobs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 10
	})
	stop()
	sorted := slices.Sorted(slices.Values(order))
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(sorted, want) {
		t.Fatalf("ran jobs %v, want each of %v once", order, want)
	}
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if order[i] > order[j]+1 {
				t.Errorf("priority %d ran before priority %d (order %v); only neighbours may swap", order[i], order[j], order)
			}
		}
	}
	if s, err := ranked.Stats(ctx, pool); err != nil || s.Scheduled != 1 {
		t.Errorf("Stats = %+v, %v; want the future job still scheduled", s, err)
	}
}
