package skipjack_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestRescueAfterKill kills a worker process that holds a job (SIGKILL, so
// it cannot release anything) and checks that a worker of this process
// rescues the job once its 2s lease lapses: the attempt is restored, the
// rescue counted and the lost lease recorded in the error history.
func TestRescueAfterKill(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	id := enqueueFast(t, pool)
	c := startChild(t, "hang", pool)
	waitFor(t, 30*time.Second, "the child to claim the job", func() bool {
		row, _ := getJob(t, pool, "fast", id)
		return row.State == "running"
	})
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	_ = c.wait()
	killed := time.Now()

	rec := &recorder{}
	start(t, fast.NewWorker(pool, func(ctx context.Context, job *fast.Job) error {
		rec.record(ctx, job)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: quietLogger(t)}))
	waitFor(t, 20*time.Second, "the rescued job to complete", func() bool {
		_, ok := getJob(t, pool, "fast", id)
		return !ok
	})
	calls := rec.get()
	if len(calls) != 1 {
		t.Fatalf("handler ran %d times, want 1", len(calls))
	}
	c0 := calls[0]
	if c0.attempt != 1 || c0.rescues != 1 {
		t.Errorf("rescued job ran as attempt %d with %d rescues, want attempt 1 (restored) and 1 rescue", c0.attempt, c0.rescues)
	}
	if len(c0.errors) != 1 || c0.errors[0].Error != "lease lost" || c0.errors[0].Attempt != 1 {
		t.Errorf("error history %+v, want one lease lost entry for attempt 1", c0.errors)
	}
	t.Logf("rescued and ran %v after the kill", c0.at.Sub(killed).Round(time.Millisecond))
}

// TestLateAckAfterLostLease makes a running attempt lose its job (as a
// rescuer would after a partition), lets a second attempt claim it, and
// then lets the first attempt finish: neither its CompleteTx nor its
// regular acknowledgement may touch the second attempt.
func TestLateAckAfterLostLease(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()

	started := make(chan int, 2)
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	txErr := make(chan error, 1)
	var calls atomic.Int32
	handle := func(hctx context.Context, job *demo.Job) error {
		n := int(calls.Add(1))
		started <- n
		<-release[n-1]
		if n == 1 {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			err = demo.CompleteTx(ctx, tx, job)
			txErr <- err
		}
		return nil // for attempt 1: a late acknowledgement
	}
	// Demo's lease is 30s, so no heartbeat runs during the test: the fencing
	// in SQL alone must protect the second attempt.
	logs := newLogs(t)
	stop := start(t, demo.NewWorker(pool, handle, skipjack.WorkerConfig{Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: logs.logger()}))
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-started; n != 1 {
		t.Fatalf("first call is %d", n)
	}
	// What a rescuer does to a lapsed lease.
	if _, err := pool.Exec(ctx, `UPDATE skipjack.demo SET state = 'pending', attempt = attempt - 1, rescues = rescues + 1, lease_expires_at = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-started:
		if n != 2 {
			t.Fatalf("second call is %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job was not claimed again")
	}
	second, _ := getJob(t, pool, "demo", id)

	close(release[0])
	if err := <-txErr; !errors.Is(err, skipjack.ErrLeaseLost) {
		t.Errorf("CompleteTx of the lost attempt = %v, want ErrLeaseLost", err)
	}
	row, ok := getJob(t, pool, "demo", id)
	if !ok || row.State != "running" || row.Claim != second.Claim || row.Attempt != 1 {
		t.Fatalf("after the late CompleteTx the job is %+v (exists %v), want still running as claim %d, attempt 1", row, ok, second.Claim)
	}

	close(release[1])
	waitFor(t, 10*time.Second, "the second attempt to be acknowledged", func() bool {
		_, ok := getJob(t, pool, "demo", id)
		return !ok
	})
	// Run returns after writing every result it kept: a late
	// acknowledgement of attempt 1 would have matched nothing and been
	// logged.
	stop()
	if logs.contains("WARN", "matched no running attempt") {
		t.Errorf("the first attempt's late acknowledgement was written; logs:\n%s", logs)
	}
}

// TestStaleBatchedAckFenced is TestLateAckAfterLostLease across two
// workers: worker A's attempt loses its job to a rescuer and worker B
// claims it again, so A's runtime cannot know and its batched
// acknowledgement reaches the database with a stale claim token. The
// statement's fencing alone must leave B's attempt running.
func TestStaleBatchedAckFenced(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}

	startedA, releaseA := make(chan struct{}), make(chan struct{})
	logsA := newLogs(t)
	// PollOnly with an hour's interval: A claims once, at start, and
	// never again, so the rescued job goes to B.
	stopA := start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		close(startedA)
		<-releaseA
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollOnly: true, PollInterval: time.Hour, Logger: logsA.logger()}))
	<-startedA
	first, _ := getJob(t, pool, "demo", id)

	// What a rescuer does to a lapsed lease.
	if _, err := pool.Exec(ctx, `UPDATE skipjack.demo SET state = 'pending', attempt = attempt - 1, rescues = rescues + 1, lease_expires_at = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	startedB, releaseB := make(chan struct{}), make(chan struct{})
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		close(startedB)
		<-releaseB
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)}))
	select {
	case <-startedB:
	case <-time.After(10 * time.Second):
		t.Fatal("worker B did not claim the rescued job")
	}
	second, _ := getJob(t, pool, "demo", id)
	if second.Claim == first.Claim {
		t.Fatalf("B's claim token %d equals A's", second.Claim)
	}

	// A's handler returns nil; stopping A flushes its acknowledgement.
	close(releaseA)
	stopA()
	if !logsA.contains("WARN", "matched no running attempt") {
		t.Errorf("A's stale acknowledgement was not reported as unmatched; logs:\n%s", logsA)
	}
	row, ok := getJob(t, pool, "demo", id)
	if !ok || row.State != "running" || row.Claim != second.Claim {
		t.Fatalf("after A's stale acknowledgement the job is %+v (exists %v), want still running as B's claim %d", row, ok, second.Claim)
	}

	close(releaseB)
	waitFor(t, 10*time.Second, "B's attempt to be acknowledged", func() bool {
		_, ok := getJob(t, pool, "demo", id)
		return !ok
	})
}
