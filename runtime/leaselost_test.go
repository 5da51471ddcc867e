package skipjack_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/slow"
)

// cancelled is a handler context's end as a test observes it.
type cancelled struct {
	at    time.Time
	cause error
}

// TestPartitionCancelsHandlers cuts a worker off from the workers table
// (an ACCESS EXCLUSIVE lock stands in for a partition: every renewal of
// its row waits and times out) while its handler runs. The handler does
// not touch the database; the worker must still cancel its context with
// ErrLeaseLost once it can no longer prove it is alive (last renewal older
// than lease minus one renewal interval), before its row has expired in
// the database, after which a rescuer could give the job to another
// worker.
func TestPartitionCancelsHandlers(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	running := make(chan struct{})
	ended := make(chan cancelled, 1)
	logs := newLogs(t)
	start(t, slow.NewWorker(pool, func(hctx context.Context, job *slow.Job) error {
		close(running)
		<-hctx.Done()
		ended <- cancelled{at: time.Now(), cause: context.Cause(hctx)}
		return hctx.Err()
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: logs.logger()}))
	if _, err := slow.Enqueue(ctx, pool, slow.Payload{N: 1}); err != nil {
		t.Fatal(err)
	}
	<-running

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE skipjack._skipjack_workers IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The worker's liveness as its last renewal before the lock left it.
	var expires time.Time
	if err := tx.QueryRow(ctx, `SELECT expires_at FROM skipjack._skipjack_workers`).Scan(&expires); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-ended:
		if !errors.Is(c.cause, skipjack.ErrLeaseLost) {
			t.Fatalf("handler context ended with cause %v, want ErrLeaseLost", c.cause)
		}
		if margin := expires.Sub(c.at); margin <= 0 {
			t.Errorf("handler cancelled %v after the worker's row expired in the database, want before", -margin)
		} else {
			t.Logf("handler cancelled %v before the worker's row expired", margin.Round(time.Millisecond))
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("handler still running 10s into the partition (lease 3s); logs:\n%s", logs)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReclaimCancelsStaleRun takes a running job away from its worker as a
// rescuer does (pending again, attempt restored) and lets the same worker
// claim it again. Its map of held jobs is keyed by id: the new claim must
// cancel the stale attempt with ErrLeaseLost rather than orphan it, and
// the stale attempt's late result must be dropped, not written.
func TestReclaimCancelsStaleRun(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	logs := newLogs(t)
	starts := make(chan *demo.Job, 2)
	staleEnd := make(chan error, 1)
	finish := make(chan struct{})
	stop := start(t, demo.NewWorker(pool, func(hctx context.Context, job *demo.Job) error {
		starts <- job
		if job.Claim == 1 {
			select {
			case <-hctx.Done():
				staleEnd <- context.Cause(hctx)
			case <-finish:
			}
			return nil // a late success: must be dropped
		}
		select {
		case <-finish:
		case <-hctx.Done():
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 2, ShutdownTimeout: time.Second, PollInterval: 50 * time.Millisecond, Logger: logs.logger()}))
	id, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := <-starts
	// Take the job away just after a heartbeat, so that the worker claims
	// it again (within PollInterval) long before its next heartbeat (a
	// third of the 30s lease away) could tell it the first attempt lost
	// the job: only the claim can cancel that attempt in time.
	afterHeartbeat(t, pool, id)
	if _, err := pool.Exec(ctx, `UPDATE skipjack.demo SET state = 'pending', attempt = attempt - 1, rescues = rescues + 1, lease_expires_at = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	var second *demo.Job
	select {
	case second = <-starts:
	case <-time.After(10 * time.Second):
		t.Fatal("the rescued job was not claimed again")
	}
	if second.Claim == first.Claim {
		t.Fatalf("second attempt has claim %d, the same as the first", second.Claim)
	}
	select {
	case cause := <-staleEnd:
		if !errors.Is(cause, skipjack.ErrLeaseLost) {
			t.Errorf("stale attempt cancelled with cause %v, want ErrLeaseLost", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stale attempt was not cancelled when the worker claimed its job again")
	}
	close(finish)
	waitFor(t, 10*time.Second, "the second attempt to be acknowledged", func() bool {
		_, ok := getJob(t, pool, "demo", id)
		return !ok
	})
	stop() // every result has been written when Run returns
	if strings.Contains(logs.String(), "matched no running attempt") {
		t.Errorf("the stale attempt's result was written; logs:\n%s", logs)
	}
}
