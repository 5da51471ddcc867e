package skipjack_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// burnJobs is how many jobs the exactly-once tests complete.
const burnJobs = 50_000

// enqueueDemo inserts n demo jobs with one COPY.
func enqueueDemo(t testing.TB, pool interface {
	demo.DBTX
}, n int) {
	t.Helper()
	ps := make([]demo.Payload, n)
	for i := range ps {
		ps[i] = demo.Payload{N: int64(i), Label: "burn"}
	}
	got, err := demo.EnqueueMany(context.Background(), pool, ps)
	if err != nil || got != int64(n) {
		t.Fatalf("EnqueueMany = %d, %v; want %d, nil", got, err, n)
	}
}

// TestExactlyOnceOneProcess completes 50k jobs with three workers of one
// process and checks that every job ran exactly once and the table is
// empty.
func TestExactlyOnceOneProcess(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	enqueueDemo(t, pool, burnJobs)

	runs := newTally()
	handle := func(ctx context.Context, job *demo.Job) error {
		runs.add(job.ID)
		return nil
	}
	begin := time.Now()
	hooks := &countingHooks{}
	var stops []func()
	for range 3 {
		stops = append(stops, start(t, demo.NewWorker(pool, handle, skipjack.WorkerConfig{Logger: quietLogger(t), Hooks: hooks})))
	}
	waitFor(t, 2*time.Minute, "all jobs to be acknowledged", func() bool {
		return runs.len() == burnJobs && queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	t.Logf("3 workers completed %d jobs in %v", burnJobs, time.Since(begin).Round(time.Millisecond))
	for _, stop := range stops {
		stop()
	}
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
	if done, claimed := hooks.done.Load(), hooks.claimed.Load(); done != burnJobs || claimed != burnJobs {
		t.Errorf("hooks saw %d jobs done and %d claimed, want %d and %d", done, claimed, burnJobs, burnJobs)
	}
}

// countingHooks counts what skipjack.Hooks reports.
type countingHooks struct {
	done, claimed atomic.Int64
}

func (h *countingHooks) JobDone(queue string, id int64, attempt int, took time.Duration, err error) {
	h.done.Add(1)
}

func (h *countingHooks) Claimed(queue string, n int, took time.Duration) { h.claimed.Add(int64(n)) }

// TestExactlyOnceTwoProcesses completes 50k jobs with a worker in this
// process and one in a child process, and checks that every job ran
// exactly once across both.
func TestExactlyOnceTwoProcesses(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	enqueueDemo(t, pool, burnJobs)

	out := filepath.Join(t.TempDir(), "ids")
	c := startChild(t, "burn", pool, childOutEnv+"="+out)
	runs := newTally()
	stop := start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		runs.add(job.ID)
		return nil
	}, skipjack.WorkerConfig{Logger: quietLogger(t)}))

	waitFor(t, 2*time.Minute, "the queue to be empty", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	stop()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal child: %v", err)
	}
	if err := c.wait(); err != nil {
		t.Fatalf("child exited with %v; output:\n%s", err, c.output.String())
	}
	childIDs := readIDs(t, out)
	for _, id := range childIDs {
		runs.add(id)
	}
	t.Logf("this process ran %d jobs, the child %d", burnJobs-len(childIDs), len(childIDs))
	if runs.len() != burnJobs {
		t.Errorf("%d distinct jobs ran, want %d", runs.len(), burnJobs)
	}
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
	if len(childIDs) == 0 {
		t.Errorf("the child process ran no job; the test did not exercise two processes")
	}
}
