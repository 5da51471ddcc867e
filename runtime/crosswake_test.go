package skipjack_test

import (
	"context"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/keyed"
)

// TestSettledJobWakesOtherProcess checks issue 43's cross-process wake-ups:
// a job of a serial key settled by worker A lets worker B, on a pool of its
// own (nothing in memory is shared but the process's LISTEN connection, so
// B hears of it only through Postgres, as another process would), claim the
// key's next job at once. B polls once an hour, and its last claim found
// that job held back by the running one; A stops claiming before its job
// settles, so only B can run the next one. Without the wake-up B runs it at
// its next poll, an hour away.
func TestSettledJobWakesOtherProcess(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	other := secondPool(t, pool)
	ctx := context.Background()

	// A: runs the key's first job until released.
	release := make(chan struct{})
	running := make(chan int64, 1)
	ctxA, stopA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() {
		doneA <- keyed.NewWorker(pool, func(ctx context.Context, j *keyed.Job) error {
			running <- j.ID
			<-release
			return nil
		}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: neverPoll, Logger: quietLogger(t)}).Run(ctxA)
	}()
	t.Cleanup(func() {
		stopA()
		select {
		case <-release:
		default:
			close(release)
		}
		if err := <-doneA; err != nil {
			t.Errorf("worker A: Run returned %v", err)
		}
	})
	if _, err := keyed.Enqueue(ctx, pool, keyed.Payload{Account: 1, N: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("worker A did not start the key's first job within 30s")
	}

	// The key's next job, inserted without a notification (nothing but
	// the settle below may wake B once its first claim is done).
	if _, err := pool.Exec(ctx, `
		WITH quiet AS (SELECT set_config('skipjack.quiet', 'on', true))
		INSERT INTO skipjack.keyed (payload) SELECT '{"account": 1, "n": 2}' FROM quiet`); err != nil {
		t.Fatal(err)
	}

	// B: claims on its own pool, polling once an hour; its first claim
	// passes over the key's next job, held back by the running one.
	claims := newClaimClock()
	startedB := make(chan time.Time, 1)
	start(t, keyed.NewWorker(other, func(ctx context.Context, j *keyed.Job) error {
		startedB <- time.Now()
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: neverPoll, Hooks: claims, Logger: quietLogger(t)}))
	waitFor(t, 30*time.Second, "worker B's first claim", func() bool { return claims.count() > 0 })
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.keyed WHERE state = 'pending'`); n != 1 {
		t.Fatalf("%d pending jobs after B's first claim, want the key's second job held back", n)
	}

	// A stops claiming, then its job settles (in its shutdown's flush).
	stopA()
	settled := time.Now()
	close(release)
	select {
	case at := <-startedB:
		// Generous for a loaded machine; B polls once an hour.
		if gap := at.Sub(settled); gap > 10*time.Second {
			t.Errorf("worker B started the key's next job %v after A's job settled, want it woken at once", gap)
		} else {
			t.Logf("worker B started the key's next job %v after A's job was released", gap.Round(time.Millisecond))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker B did not start the key's next job within 30s of A's job settling (it polls once an hour): no cross-process wake-up")
	}
}
