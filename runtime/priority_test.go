package skipjack_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
)

// TestPriorityOrder enqueues jobs with priorities 9 down to 0 (the worst
// first, so that id order is the reverse of priority order), plus a job of
// the best priority scheduled for tomorrow, and works them with one
// handler: every job runs once, best priority first, and the future job
// does not run.
//
// "Best first" is checked where it holds whatever the timing: when a job
// starts, no better due job is pending and free to claim. The order in
// which jobs start is not checked: the worker keeps two claims in flight,
// and on a loaded machine one claim can be overtaken by several others
// (a job of priority 5 locked by a stalled claim starts after 6 and 7,
// claimed by the claims that ran meanwhile). The check locks what it finds
// (SKIP LOCKED skips the jobs the worker's claims hold, and only a job
// claimed out of order is there to be locked), so it never makes a claim
// skip a job it would otherwise have taken.
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
	var overtaken []string
	w := ranked.NewWorker(pool, func(ctx context.Context, job *ranked.Job) error {
		// Any row found is a better job that a claim passed over.
		rows, err := pool.Query(ctx, `SELECT priority FROM skipjack.ranked
			WHERE state = 'pending' AND run_at <= now() AND priority < $1
			FOR NO KEY UPDATE SKIP LOCKED`, job.Payload.N)
		if err != nil {
			return err
		}
		better, err := pgx.CollectRows(rows, pgx.RowTo[int16])
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, job.Payload.N)
		if len(better) > 0 {
			overtaken = append(overtaken, fmt.Sprintf("priority %d started while %v were pending and free", job.Payload.N, better))
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, BatchSize: 1, Logger: quietLogger(t)})
	stop := start(t, w)
	waitFor(t, 30*time.Second, "ten jobs", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 10
	})
	stop()
	sorted := slices.Sorted(slices.Values(order))
	if want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(sorted, want) {
		t.Fatalf("ran jobs %v, want each of %v once", order, want)
	}
	for _, o := range overtaken {
		t.Errorf("%s (order %v)", o, order)
	}
	if s, err := ranked.Stats(ctx, pool); err != nil || s.Scheduled != 1 {
		t.Errorf("Stats = %+v, %v; want the future job still scheduled", s, err)
	}
}
