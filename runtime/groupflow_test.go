package skipjack_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/paced"
)

// The group tests run a queue with limits inside RunGroup beside a demo
// worker whose one job holds the group's whole budget until the test lets
// it go. A limited queue's claim counts against its limits in every
// process (a claimed job holds a concurrency slot, a claim uses up the
// rate window), so it must claim only what can start now.

// startGroup runs workers in RunGroup with cfg until the test ends.
func startGroup(t *testing.T, cfg skipjack.GroupConfig, workers ...skipjack.GroupWorker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- skipjack.RunGroup(ctx, cfg, workers...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunGroup returned %v, want nil", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("RunGroup did not return within a minute of cancellation")
		}
	})
}

// budgetHolder is a demo worker whose first job holds its handler slot,
// and so one token of its group's budget, until release is called.
type budgetHolder struct {
	worker  *demo.Worker
	started chan struct{} // closed when the holding job's handler runs
	release func()        // lets it return
}

func newBudgetHolder(t *testing.T, pool *pgxpool.Pool) *budgetHolder {
	t.Helper()
	hold := make(chan struct{})
	var once, startOnce sync.Once
	h := &budgetHolder{started: make(chan struct{}), release: func() { once.Do(func() { close(hold) }) }}
	h.worker = demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		startOnce.Do(func() { close(h.started) })
		<-hold
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)})
	return h
}

// hold enqueues the holding job and waits until its handler holds the
// budget. Call it after startGroup: the job is let go before the group
// stops (cleanups run last first).
func (h *budgetHolder) hold(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	t.Cleanup(h.release)
	if _, err := demo.Enqueue(context.Background(), pool, demo.Payload{Label: "hold"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the job holding the group's budget did not start")
	}
}

// mostRunningWithin samples, for d, how many jobs of table are claimed
// (state running) and returns the most it saw.
func mostRunningWithin(t *testing.T, pool *pgxpool.Pool, table string, d time.Duration) int64 {
	t.Helper()
	most := int64(0)
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		most = max(most, queryInt(t, pool, `SELECT count(*) FROM skipjack.`+table+` WHERE state = 'running'`))
	}
	return most
}

// TestGroupRateLimitClaimsOnlyWhatStarts runs the paced queue (rate 50 per
// second) in a group of budget 1 whose token another queue's job holds.
// Before, the paced worker claimed 50 jobs that sat running without a
// handler until the budget freed (their claims used up the rate window
// meanwhile), and then 100 handlers started within milliseconds: the 50
// claimed long before, and 50 more claimed in the next window. Now the
// worker asks the budget before it claims: nothing is claimed while the
// budget is held, and no window of a second holds more than 50 starts.
func TestGroupRateLimitClaimsOnlyWhatStarts(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 60)
	ctx := context.Background()
	holder := newBudgetHolder(t, pool)
	var mu sync.Mutex
	var starts []time.Time
	pw := paced.NewWorker(pool, func(ctx context.Context, job *paced.Job) error {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil
	}, skipjack.WorkerConfig{Concurrency: 50, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)})
	startGroup(t, skipjack.GroupConfig{Concurrency: 1}, holder.worker, pw)
	holder.hold(t, pool)

	const jobs = 100
	if _, err := paced.EnqueueMany(ctx, pool, make([]paced.Payload, jobs)); err != nil {
		t.Fatal(err)
	}
	// The worker is woken by the enqueue at once; 1.5s is ample for a claim
	// to land even at a load of 8.
	if n := mostRunningWithin(t, pool, "paced", 1500*time.Millisecond); n > 0 {
		t.Errorf("%d paced jobs were claimed (running) while the group's budget was held elsewhere, want 0: no handler could start them", n)
	}
	holder.release()
	waitFor(t, 60*time.Second, "every paced job to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(starts) == jobs
	})
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The rate counts claims on the database clock; a handler starts a few
	// milliseconds after its claim, by a delay that varies under load. A
	// window 100ms shorter than the rate's absorbs that variance; before,
	// 100 starts fell within 10ms.
	const window = 900 * time.Millisecond
	most := 0
	for i, s := range starts {
		j, _ := slices.BinarySearchFunc(starts, s.Add(window), func(a, b time.Time) int { return a.Compare(b) })
		most = max(most, j-i)
	}
	if most > 50 {
		t.Errorf("%d paced handlers started within %v, want at most 50 (the rate is 50 per second)", most, window)
	}
	t.Logf("busiest %v window: %d starts; %d starts over %v", window, most, jobs, starts[jobs-1].Sub(starts[0]))
}

// TestGroupConcurrencyLimitLeavesJobsToOthers runs the capped queue
// (concurrency 3 across processes) in a group of budget 1 whose token
// another queue's job holds, and a second capped worker on its own pool
// (another process, as far as the database can tell). Before, the group's
// worker claimed the 3 pending jobs, which then waited for the budget and
// held the queue's whole concurrency limit: the second worker, idle, ran
// none of them. Now the group's worker claims only what its budget lets it
// start, and the second worker runs all 3.
func TestGroupConcurrencyLimitLeavesJobsToOthers(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 30)
	ctx := context.Background()
	holder := newBudgetHolder(t, pool)
	var inGroup, outside atomic.Int64
	cw := capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
		inGroup.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 3, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)})
	startGroup(t, skipjack.GroupConfig{Concurrency: 1}, holder.worker, cw)
	holder.hold(t, pool)

	if _, err := capped.EnqueueMany(ctx, pool, make([]capped.Payload, 3)); err != nil {
		t.Fatal(err)
	}
	// Give the group's worker every chance to claim them (it did at once
	// before; it must not now) before the other worker starts.
	if n := mostRunningWithin(t, pool, "capped", 1500*time.Millisecond); n > 0 {
		t.Errorf("%d capped jobs were claimed (running) while the group's budget was held elsewhere, want 0", n)
	}
	start(t, capped.NewWorker(secondPool(t, pool), func(ctx context.Context, job *capped.Job) error {
		outside.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 3, PollInterval: 100 * time.Millisecond, Logger: quietLogger(t)}))
	deadline := time.Now().Add(20 * time.Second)
	for outside.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := outside.Load(); n != 3 {
		t.Errorf("the worker outside the group ran %d of the 3 pending capped jobs within 20s, want 3 (the group's worker, whose budget is held, ran %d)", n, inGroup.Load())
	}
}
