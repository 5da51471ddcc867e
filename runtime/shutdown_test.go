package skipjack_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestShutdown cancels Run while two handlers run and two jobs are
// prefetched: the prefetched ones must be released at once (pending again,
// attempt restored) while the running ones finish, and no job may run
// twice when a second worker finishes the queue.
func TestShutdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// shutdownTimeout is WorkerConfig.ShutdownTimeout.
		shutdownTimeout time.Duration
		// obey makes the handlers wait for their context instead of the test.
		obey bool
	}{
		{name: "in-flight handlers finish", shutdownTimeout: 30 * time.Second},
		{name: "handlers are cancelled after ShutdownTimeout", shutdownTimeout: 300 * time.Millisecond, obey: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 8)
			enqueueDemo(t, pool, 10)

			runs := newTally()
			started := make(chan struct{}, 10)
			finish := make(chan struct{})
			stop := start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
				runs.add(job.ID)
				started <- struct{}{}
				if tc.obey {
					<-hctx.Done()
					return hctx.Err()
				}
				<-finish
				return nil
			}, skipjack.WorkerConfig{Concurrency: 2, ShutdownTimeout: tc.shutdownTimeout, Logger: quietLogger(t)}))
			<-started
			<-started
			waitFor(t, 5*time.Second, "four jobs claimed", func() bool {
				return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'running'`) == 4
			})

			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }()
			waitFor(t, 5*time.Second, "the prefetched jobs to be released", func() bool {
				return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0`) == 8
			})
			if !tc.obey {
				select {
				case <-stopped:
					t.Fatal("Run returned while handlers were running")
				default:
				}
			}
			close(finish)
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its handlers finished")
			}
			wantLeft := int64(8)
			if tc.obey {
				wantLeft = 10 // the two cancelled attempts are released
				if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending' AND attempt = 0 AND errors = '[]'`); n != 10 {
					t.Errorf("%d jobs are pending with attempt 0 and no error, want 10 (cancelled attempts released, not counted)", n)
				}
			}
			if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`); n != wantLeft {
				t.Errorf("%d jobs left after shutdown, want %d", n, wantLeft)
			}
			if tc.obey {
				return
			}
			start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
				runs.add(job.ID)
				return nil
			}, skipjack.WorkerConfig{Logger: quietLogger(t)}))
			waitFor(t, 10*time.Second, "the rest to complete", func() bool {
				return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
			})
			if runs.len() != 10 || runs.duplicates() != 0 {
				t.Errorf("%d distinct jobs ran, %d more than once; want 10 and 0", runs.len(), runs.duplicates())
			}
		})
	}
}

// TestNoGoroutineLeft checks that every goroutine Run started, including
// the shared listener's, has ended when Run returns, and that a worker
// keeps handler goroutines only while it has jobs: 100 while 100 handlers
// run, none once its queue is empty. It is not parallel: it counts the
// process's goroutines.
func TestNoGoroutineLeft(t *testing.T) {
	pool := newQueues(t, 8)
	enqueueDemo(t, pool, 500)
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var running atomic.Int64
	release := make(chan struct{})
	w := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		running.Add(1)
		<-release
		return nil
	}, skipjack.WorkerConfig{Logger: quietLogger(t)})
	go func() { done <- w.Run(ctx) }()
	waitFor(t, 20*time.Second, "100 handlers to run", func() bool { return running.Load() == 100 })
	if busy := runtime.NumGoroutine(); busy < before+100 {
		t.Errorf("%d goroutines while 100 handlers run, want at least %d", busy, before+100)
	}
	close(release)
	waitFor(t, 20*time.Second, "the jobs to complete", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo`) == 0
	})
	// The run's own loops (claims, results, liveness, heartbeats, leases,
	// timeouts, maintenance) and the shared listener stay; the handler
	// goroutines do not.
	waitFor(t, 5*time.Second, "the handler goroutines to end", func() bool { return runtime.NumGoroutine() < before+20 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Run returned, %d before; dump:\n%s", after, before, buf[:runtime.Stack(buf, true)])
	}
}
