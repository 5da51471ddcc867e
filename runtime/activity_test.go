package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestActivityCountsDeletedJobs checks that the statements that acknowledge
// and resolve jobs count them in the counts table, so that Activity reports
// them for a queue that deletes completed jobs at ack (fast): completions
// through the batched ack and through CompleteTx, permanent failures, and
// failed attempts that are retried, with one wait per job completed by the
// batched ack, below the time the test took.
//
// Breaking the counted CTE of Complete (or of Resolve) fails it.
func TestActivityCountsDeletedJobs(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	begin := dbNow(t, pool).Add(-time.Minute)
	const ok, fail, flaky, inTx = 20, 5, 3, 2
	labels := map[string]int{"ok": ok, "fail": fail, "flaky": flaky, "tx": inTx}
	attempts := &attemptRecorder{labels: map[int64]string{}}
	for label, n := range labels {
		for i := range n {
			id, err := fast.Enqueue(ctx, pool, fast.Payload{N: int64(i), Label: label})
			if err != nil {
				t.Fatal(err)
			}
			attempts.labels[id] = label
		}
	}
	stop := start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		switch job.Payload.Label {
		case "fail":
			return skipjack.Permanent(errors.New("bad input"))
		case "flaky":
			if job.Attempt == 1 {
				return errors.New("try again")
			}
		case "tx":
			txCtx, cancel := beyondTimeout(ctx)
			defer cancel()
			tx, err := pool.Begin(txCtx)
			if err != nil {
				return err
			}
			defer tx.Rollback(txCtx)
			if err := fast.CompleteTx(txCtx, tx, job); err != nil {
				return err
			}
			return tx.Commit(txCtx)
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, Logger: newLogs(t).logger(), Hooks: attempts}))
	waitFor(t, 20*time.Second, "every job to finish", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.fast WHERE state IN ('pending', 'running')`) == 0
	})
	stop()
	took := time.Since(begin)

	mins, err := fast.Admin(pool).(skipjack.QueueInsights).Activity(ctx, begin)
	if err != nil {
		t.Fatal(err)
	}
	var got skipjack.ActivityMinute
	for _, m := range mins {
		got.Completed += m.Completed
		got.Failed += m.Failed
		got.Retried += m.Retried
		got.Waits = skipjack.AddWaits(got.Waits, m.Waits)
	}
	if got.Completed != ok+flaky+inTx || got.Failed != fail || got.Retried != flaky {
		t.Errorf("Activity summed to completed %d, failed %d, retried %d; want %d, %d, %d; the worker's attempts:\n%s",
			got.Completed, got.Failed, got.Retried, ok+flaky+inTx, fail, flaky, attempts)
	}
	var waits int64
	for _, n := range got.Waits {
		waits += n
	}
	if waits != ok+flaky || len(got.Waits) != len(skipjack.WaitBounds)+1 {
		t.Errorf("wait histogram %v holds %d waits in %d buckets, want %d in %d (the jobs the batched ack completed)",
			got.Waits, waits, len(got.Waits), ok+flaky, len(skipjack.WaitBounds)+1)
	}
	if p95, over, ok := skipjack.WaitQuantile(got.Waits, 0.95); !ok || over || p95 > 2*took {
		t.Errorf("p95 wait %v (over %v, ok %v), want at most about the test's %v", p95, over, ok, took)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.fast`); n != fail {
		t.Errorf("%d rows left in fast, want the %d failed ones (completed jobs are deleted at ack)", n, fail)
	}
}

// attemptRecorder is a JobEndHook that keeps every attempt's outcome, so a
// test that counts outcomes can say which attempts it did not expect.
type attemptRecorder struct {
	labels map[int64]string // the jobs' labels by id, written before the worker runs
	mu     sync.Mutex
	lines  []string
}

// JobEnd records one attempt.
func (r *attemptRecorder) JobEnd(_ context.Context, job skipjack.JobInfo, res skipjack.AttemptResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("job %d (%s) attempt %d: %s after %v (%v)",
		job.ID, r.labels[job.ID], job.Attempt, res.Outcome, res.Took, res.Err))
}

// String lists the attempts in the order they ended.
func (r *attemptRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// TestWaitQuantile checks the quantiles read from a wait histogram.
func TestWaitQuantile(t *testing.T) {
	t.Parallel()
	hist := func(pairs ...int) []int64 {
		h := make([]int64, len(skipjack.WaitBounds)+1)
		for i := 0; i < len(pairs); i += 2 {
			h[pairs[i]] = int64(pairs[i+1])
		}
		return h
	}
	tests := []struct {
		name  string
		waits []int64
		q     float64
		want  time.Duration
		over  bool
		ok    bool
	}{
		{"empty", hist(), 0.5, 0, false, false},
		{"all below 1ms", hist(0, 10), 0.5, time.Millisecond, false, true},
		{"median in the second bucket", hist(0, 4, 1, 6), 0.5, 2 * time.Millisecond, false, true},
		{"p95 in the tail", hist(0, 90, 9, 10), 0.95, time.Second, false, true},
		{"beyond the last bound", hist(len(skipjack.WaitBounds), 3), 0.5, time.Hour, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, over, ok := skipjack.WaitQuantile(tt.waits, tt.q)
			if got != tt.want || over != tt.over || ok != tt.ok {
				t.Errorf("WaitQuantile(%v, %v) = %v, %v, %v; want %v, %v, %v", tt.waits, tt.q, got, over, ok, tt.want, tt.over, tt.ok)
			}
		})
	}
}
