package skipjack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// TestPoolExhaustedByHandlers is the exhausted pool of issue 9: the pool
// given to the worker has exactly Concurrency connections, and every
// handler takes one and holds it until the lease its job had when the
// handler started has lapsed by the database's clock (more than the
// queue's 3s lease). The worker's own statements must not need that pool:
// heartbeats renew every lease while the pool is exhausted (each handler
// finds its job still running under its claim, with a lease extended past
// the one it started with), claims keep starting jobs and acknowledgements
// keep completing them. No handler may be cancelled, no job may run twice,
// and all of them complete.
func TestPoolExhaustedByHandlers(t *testing.T) {
	t.Parallel()
	const (
		concurrency = 4
		// Three rounds of handlers: the second and third start while the
		// pool is held, so they were claimed (and the first acknowledged)
		// through the control pool.
		jobs = 3 * concurrency
	)
	pool := newQueues(t, concurrency)
	ctx := context.Background()
	admin := adminPool(t, pool)

	ps := make([]slow.Payload, jobs)
	for i := range ps {
		ps[i] = slow.Payload{N: int64(i)}
	}
	if n, err := slow.EnqueueMany(ctx, admin, ps); err != nil || n != jobs {
		t.Fatalf("EnqueueMany = %d, %v; want %d, nil", n, err, jobs)
	}

	runs := newTally()
	var mu sync.Mutex
	var problems []string
	exhausted := 0 // handlers that saw every connection of the pool taken at the end of their hold
	var longest time.Duration
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	handle := func(hctx context.Context, job *slow.Job) error {
		runs.add(job.ID)
		started := time.Now()
		conn, err := pool.Acquire(hctx)
		if err != nil {
			problem("job %d: acquire: %v (cause %v)", job.ID, err, context.Cause(hctx))
			return err
		}
		defer conn.Release()
		fail := func(what string, err error) error {
			problem("job %d: %s: %v (cause %v)", job.ID, what, err, context.Cause(hctx))
			return err
		}
		var expiry time.Time
		if err := conn.QueryRow(hctx, `SELECT lease_expires_at FROM skipjack.slow WHERE id = $1 AND claim = $2`, job.ID, job.Claim).Scan(&expiry); err != nil {
			return fail("read lease", err)
		}
		// Hold the connection until the lease the job had when the
		// handler started has lapsed by the database's clock: without a
		// heartbeat, the job would be up for rescue now.
		for {
			var lapsed bool
			if err := conn.QueryRow(hctx, `SELECT now() > $1::timestamptz + interval '200 milliseconds'`, expiry).Scan(&lapsed); err != nil {
				return fail("read clock", err)
			}
			if lapsed {
				break
			}
			select {
			case <-hctx.Done():
				return fail("held connection", context.Cause(hctx))
			case <-time.After(50 * time.Millisecond):
			}
		}
		var state string
		var claim int32
		var renewed bool
		if err := conn.QueryRow(hctx, `SELECT state, claim, lease_expires_at > now() FROM skipjack.slow WHERE id = $1`, job.ID).Scan(&state, &claim, &renewed); err != nil {
			return fail("read job", err)
		}
		if state != "running" || claim != job.Claim || !renewed {
			problem("job %d after its lease %v lapsed: state %s, claim %d (ours %d), lease extended %v; want running, ours, extended",
				job.ID, expiry.Format(time.TimeOnly), state, claim, job.Claim, renewed)
		}
		mu.Lock()
		if pool.Stat().AcquiredConns() == concurrency {
			exhausted++
		}
		longest = max(longest, time.Since(started))
		mu.Unlock()
		return nil
	}
	logs := newLogs(t)
	stop := start(t, slow.NewWorker(pool, handle, skipjack.WorkerConfig{
		Concurrency:  concurrency,
		PollInterval: 100 * time.Millisecond,
		Logger:       logs.logger(),
	}))
	began := time.Now()
	waitFor(t, 60*time.Second, "every job to be acknowledged, or a handler to find its lease not renewed", func() bool {
		mu.Lock()
		failed := len(problems) > 0
		mu.Unlock()
		return failed || queryInt(t, admin, `SELECT count(*) FROM skipjack.slow`) == 0
	})
	took := time.Since(began)
	stop()

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if runs.len() != jobs || runs.duplicates() != 0 {
		t.Errorf("%d distinct jobs ran, %d more than once; want %d and 0", runs.len(), runs.duplicates(), jobs)
	}
	if exhausted == 0 {
		t.Errorf("no handler saw all %d connections of the pool taken; the test did not exhaust the pool", concurrency)
	}
	for _, msg := range []string{"lost the lease", "cannot prove the leases"} {
		if logs.contains("WARN", msg) {
			t.Errorf("the worker logged %q while handlers held its pool", msg)
		}
	}
	if !t.Failed() {
		t.Logf("%d jobs, each holding one of the pool's %d connections for up to %v (3s lease): all completed in %v, %d handlers saw the pool exhausted",
			jobs, concurrency, longest.Round(time.Millisecond), took.Round(time.Millisecond), exhausted)
	}
}
