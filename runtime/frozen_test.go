package skipjack_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/paced"
)

// runPaced is the child of TestFrozenClaimerDoesNotStopLimitedQueue: it
// works paced jobs (a queue with a rate limit), doing nothing with them.
func runPaced(ctx context.Context, pool *pgxpool.Pool) error {
	return paced.NewWorker(pool, func(context.Context, *paced.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 4, PollInterval: 100 * time.Millisecond}).Run(ctx)
}

// TestFrozenClaimerDoesNotStopLimitedQueue checks that a process frozen in
// the middle of a limited queue's claim (SIGSTOP here; a paused VM, a
// frozen container or a debugger elsewhere) does not stop the queue's
// other workers for long. Its claim's transaction holds the lock under
// which the queue's claims take turns, and its client sends nothing more:
// the connection stays healthy (the kernel still acknowledges it), so
// neither TCP nor the other workers' deadlines end that transaction; the
// server must.
func TestFrozenClaimerDoesNotStopLimitedQueue(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	if _, err := paced.EnqueueMany(ctx, pool, make([]paced.Payload, 2000)); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "paced", pool)
	freezeInClaim(t, pool, c)
	var ran atomic.Int64
	start(t, paced.NewWorker(pool, func(context.Context, *paced.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "jobs to run while another process is frozen inside its claim", func() bool { return ran.Load() >= 10 })
}

// freezeInClaim stops the child with SIGSTOP at a moment when it holds the
// lock of a limited queue's claim transaction, idle in that transaction on
// the server, and leaves it stopped (it is let go at cleanup). It tries
// again, at random moments, until it catches the child there.
func freezeInClaim(t *testing.T, pool *pgxpool.Pool, c *child) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("stop the child: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the statement it sent ends
		var held int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.locktype = 'advisory' AND l.granted AND a.state = 'idle in transaction'
			  AND a.datname = current_database() AND a.query ~ 'name: (Admit|Claim|Headroom) '`).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held > 0 {
			t.Cleanup(func() { _ = c.cmd.Process.Signal(syscall.SIGCONT) })
			return
		}
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("continue the child: %v", err)
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	}
	t.Fatal("never caught the child inside a claim's transaction")
}
