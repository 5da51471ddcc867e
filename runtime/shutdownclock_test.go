package skipjack_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// runAsync runs w until the returned cancel is called; done receives Run's
// result. The worker is stopped at cleanup too.
func runAsync(t *testing.T, w runner) (cancel func(), done <-chan error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- w.Run(ctx) }()
	t.Cleanup(stop)
	return stop, ch
}

// TestShutdownTimeoutFromCancellation cancels Run while two handlers run
// and two jobs are prefetched. The handlers obey their contexts. Their
// contexts must be cancelled no earlier than ShutdownTimeout (1s) after
// Run's and not much later; the prefetched jobs are released before that,
// at once; no further job starts; and the two interrupted jobs are
// released with their attempt restored and no error recorded, not counted
// as failed attempts.
func TestShutdownTimeoutFromCancellation(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	enqueueDemo(t, pool, 10)
	const timeout = time.Second
	runs := newTally()
	started := make(chan struct{}, 10)
	var mu sync.Mutex
	var ends []time.Time
	stop, done := runAsync(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		runs.add(job.ID)
		started <- struct{}{}
		<-hctx.Done()
		mu.Lock()
		ends = append(ends, time.Now())
		mu.Unlock()
		return context.Cause(hctx)
	}, skipjack.WorkerConfig{Concurrency: 2, ShutdownTimeout: timeout, Logger: quietLogger(t)}))
	<-started
	<-started
	waitFor(t, 5*time.Second, "four jobs claimed", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 4
	})

	cancelled := time.Now()
	stop()
	waitFor(t, 5*time.Second, "the prefetched jobs to be released", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0`) == 8
	})
	released := time.Since(cancelled)
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout + 5*time.Second):
		t.Fatal("Run did not return within ShutdownTimeout + 5s")
	}
	took := time.Since(cancelled)
	if err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ends) != 2 {
		t.Fatalf("%d handler contexts ended, want 2", len(ends))
	}
	for _, end := range ends {
		if d := end.Sub(cancelled); d < timeout || d > timeout+time.Second {
			t.Errorf("a handler context was cancelled %v after Run's, want within [%v, %v]", d, timeout, timeout+time.Second)
		}
	}
	if released >= timeout {
		t.Errorf("prefetched jobs released %v after cancellation, want at once (before ShutdownTimeout)", released)
	}
	if runs.len() != 2 {
		t.Errorf("%d jobs started, want 2: no prefetched job may start after cancellation", runs.len())
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0 AND errors = '[]'`); n != 10 {
		t.Errorf("%d of 10 jobs pending with attempt 0 and no error, want 10 (interrupted jobs released, attempt restored)", n)
	}
	t.Logf("prefetched released after %v, Run returned after %v", released.Round(time.Millisecond), took.Round(time.Millisecond))
}

// blockingClaims is a Hooks whose Claimed blocks, once armed, every claim
// until release is closed: a claim statement still in flight.
type blockingClaims struct {
	mu      sync.Mutex
	armed   bool
	blocked chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *blockingClaims) JobDone(string, int64, int, time.Duration, error) {}

func (h *blockingClaims) Claimed(string, int, time.Duration) {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if armed {
		h.once.Do(func() { close(h.blocked) })
		<-h.release
	}
}

func (h *blockingClaims) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

// TestShutdownClockStartsAtCancellation cancels Run while a claim
// statement is still in flight (held open by a hook). The claim must not
// delay the ShutdownTimeout clock: the running handler's context is
// cancelled ShutdownTimeout after Run's, not after the claim returned.
func TestShutdownClockStartsAtCancellation(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	const timeout = 500 * time.Millisecond
	hooks := &blockingClaims{blocked: make(chan struct{}), release: make(chan struct{})}
	running := make(chan struct{})
	ended := make(chan time.Time, 1)
	stop, done := runAsync(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		close(running)
		<-hctx.Done()
		ended <- time.Now()
		return hctx.Err()
	}, skipjack.WorkerConfig{Concurrency: 1, BatchSize: 1, PollInterval: 100 * time.Millisecond, ShutdownTimeout: timeout, Hooks: hooks, Logger: quietLogger(t)}))
	var releaseOnce sync.Once
	releaseClaims := func() { releaseOnce.Do(func() { close(hooks.release) }) }
	t.Cleanup(releaseClaims) // before the worker stops
	enqueueDemo(t, pool, 1)
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	hooks.arm() // the next poll's claim stays in flight
	select {
	case <-hooks.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no second claim while the handler ran")
	}
	cancelled := time.Now()
	stop()
	var end time.Time
	select {
	case end = <-ended:
	case <-time.After(5 * time.Second):
		releaseClaims()
		t.Fatal("the handler was not cancelled within 5s of Run's cancellation while a claim was in flight")
	}
	releaseClaims()
	if d := end.Sub(cancelled); d < timeout || d > timeout+time.Second {
		t.Errorf("handler cancelled %v after Run's cancellation, want within [%v, %v]", d, timeout, timeout+time.Second)
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// TestShutdownStuckHandler has a handler that ignores its context: Run
// must still return within ShutdownTimeout plus its bounded grace, with an
// error that names the stuck job.
func TestShutdownStuckHandler(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	const timeout = 300 * time.Millisecond
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	running := make(chan int64, 1)
	stop, done := runAsync(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		running <- job.ID
		<-unblock
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, ShutdownTimeout: timeout, Logger: quietLogger(t)}))
	enqueueDemo(t, pool, 1)
	var id int64
	select {
	case id = <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	cancelled := time.Now()
	stop()
	select {
	case err := <-done:
		took := time.Since(cancelled)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprint(id)) {
			t.Errorf("Run = %v, want an error naming job %d", err, id)
		}
		if took > timeout+2*time.Second {
			t.Errorf("Run returned %v after cancellation, want within ShutdownTimeout + 1s grace (+1s slack)", took)
		}
	case <-time.After(timeout + 10*time.Second):
		t.Fatal("Run did not return while a handler ignored its context")
	}
}

// TestOverrunAbandoned has a handler of the fast queue (timeout 500ms,
// lease 2s) that ignores its context: once it has overrun its timeout by a
// lease, the worker must stop renewing the job's lease and say so, so the
// job runs again instead of being held forever.
func TestOverrunAbandoned(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	logs := newLogs(t)
	unblock := make(chan struct{})
	runs := newTally()
	_, _ = runAsync(t, fast.NewWorker(pool, func(hctx context.Context, job *fast.Job) error {
		runs.add(job.ID)
		if runs.count(job.ID) == 1 {
			<-unblock
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, ShutdownTimeout: 100 * time.Millisecond, Logger: logs.logger()}))
	t.Cleanup(func() { close(unblock) }) // before the worker stops
	id := enqueueFast(t, pool)
	waitFor(t, 10*time.Second, "the overrun to be logged", func() bool {
		return logs.contains("WARN", "ignore their context long past the queue's timeout")
	})
	waitFor(t, 10*time.Second, "the job to run again and complete", func() bool {
		_, ok := getJob(t, pool, "fast", id)
		return !ok && runs.count(id) == 2
	})
}
