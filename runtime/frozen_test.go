package skipjack_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tenanted"
)

// TestFrozenClaimerDoesNotStopLimitedQueue checks that a process frozen in
// the middle of a limited queue's claim (SIGSTOP here; a paused VM, a
// frozen container or a debugger elsewhere) does not stop the queue's
// other workers for long. Its claim's transaction holds the lock under
// which the queue's claims take turns, and its client sends nothing more:
// the connection stays healthy (the kernel still acknowledges it), so
// neither TCP nor the other workers' deadlines end that transaction; the
// server must.
//
// The queue has a per-key limit: its claims keep their transaction open
// between statements (a turn may claim again, and commits apart). The
// claims of the other limited queues go out in one batch that commits on
// its own whether or not the client reads on, so their process cannot
// freeze inside their transaction (TestFrozenReaderReleasesItsClaim covers
// a client that stops reading the claimed rows).
func TestFrozenClaimerDoesNotStopLimitedQueue(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, perKeySpans); err != nil {
		t.Fatal(err)
	}
	ps := make([]tenanted.Payload, 2000)
	for i := range ps {
		ps[i] = tenanted.Payload{Tenant: int64(i)}
	}
	if _, err := tenanted.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "tenanted", pool)
	// Caught holding the queue's lock, idle in its claim's transaction.
	freezeInClaim(t, pool, c, `a.state = 'idle in transaction' AND EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) AND a.query ~ 'name: (Admit|Claim|ClaimFrom|Headroom) '`, nil)
	var ran atomic.Int64
	start(t, tenanted.NewWorker(pool, func(context.Context, *tenanted.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "jobs to run while another process is frozen inside its claim", func() bool { return ran.Load() >= 10 })
}

// TestFrozenReaderReleasesItsClaim checks that the jobs of a claim whose
// process froze while it read the claimed rows are claimed by others. The
// claim's backend blocks writing rows the stopped client never reads; its
// transaction, uncommitted, keeps those rows locked, and every other
// claim skips them (SKIP LOCKED), for as long as the process stays
// stopped: the connection stays healthy, so TCP never gives up on it
// unless the server bounds how long its data may stay unread.
func TestFrozenReaderReleasesItsClaim(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	// 32 KB payloads (stored compressed): a claim of 500 sends 16 MB, far
	// more than the socket buffers between the backend and a client that
	// stopped reading can hold.
	ps := make([]demo.Payload, 4000)
	for i := range ps {
		ps[i] = demo.Payload{N: int64(i), Label: strings.Repeat("x", 32<<10)}
	}
	if _, err := demo.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "bigclaim", pool)
	// Between tries, keep the queue from running dry: the child claims
	// every job in seconds, and a loaded machine may take longer than
	// that to catch it inside a claim.
	refill := func() {
		if queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE state = 'pending'`) < 2000 {
			if _, err := demo.EnqueueMany(ctx, pool, ps[:2000]); err != nil {
				t.Fatal(err)
			}
		}
	}
	frozen := freezeInClaim(t, pool, c, `a.wait_event = 'ClientWrite' AND a.query ~ 'name: Claim(From)? '`, refill)
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 50, Logger: quietLogger(t)}))
	// The server ends the frozen claim's session once its rows stay unread
	// for the claim's stall limit (2s here): the guarantee under test. The
	// bound is generous, for a loaded machine; without the limit the
	// session lives as long as the process stays stopped.
	waitFor(t, 30*time.Second, "the server to end the session of the frozen claim", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, frozen) == 0
	})
	// Jobs the stopped process had claimed and committed are running and
	// come back when their leases lapse; the rows of its unfinished claim
	// were pending to everyone else once its transaction ended. How fast
	// the other worker claims them depends on the machine (each job is 32
	// KB), so the wait fails only when the count stops going down.
	waitForProgress(t, 20*time.Second, "the frozen claim's jobs to be claimed by another worker", func() int64 {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack.demo WHERE "state" = 'pending'`)
	})
}

// waitForProgress waits until count returns 0, failing only when it has
// not gone down for stall: a wait bounded by progress, not by a total
// time, so a loaded machine slows it without failing it.
func waitForProgress(t testing.TB, stall time.Duration, what string, count func() int64) {
	t.Helper()
	last, since := count(), time.Now()
	for last > 0 {
		time.Sleep(10 * time.Millisecond)
		n := count()
		if n < last {
			last, since = n, time.Now()
			continue
		}
		if time.Since(since) > stall {
			t.Fatalf("waiting for %s: stuck at %d for %v", what, n, stall)
		}
	}
}

// runBigClaim is the child of TestFrozenReaderReleasesItsClaim: it works
// demo jobs 500 at a time, doing nothing with them.
func runBigClaim(ctx context.Context, pool *pgxpool.Pool) error {
	return demo.NewWorker(pool, func(context.Context, *demo.Job) error { return nil },
		skipjack.WorkerConfig{Concurrency: 500, BatchSize: 500}).Run(ctx)
}

// freezeInClaim stops the child with SIGSTOP at a moment when the backend
// of one of its claims matches where (a condition on pg_stat_activity a),
// and leaves it stopped (it is let go at cleanup). It tries again, at
// random moments, until it catches the child there, and returns the pids
// of the backends it caught. A backend counts as caught only when it still
// matches 300ms later (the stopped child sends nothing new): one seen writing rows the
// moment the child stopped may have had only a socket buffer's worth left
// to write, and then finishes its statement and goes idle, which leaves
// nothing for the server to end (seen failing 1 run in 4 at load 10).
// Between tries it calls between, when not nil.
func freezeInClaim(t *testing.T, pool *pgxpool.Pool, c *child, where string, between func()) []int32 {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("stop the child: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // the statement it sent ends, or blocks
		caught := matching(t, pool, where, nil)
		if len(caught) > 0 {
			time.Sleep(300 * time.Millisecond)
			caught = matching(t, pool, where, caught)
		}
		if len(caught) > 0 {
			t.Cleanup(func() { _ = c.cmd.Process.Signal(syscall.SIGCONT) })
			return caught
		}
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("continue the child: %v", err)
		}
		if between != nil {
			between()
		}
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	}
	// What the child's backends were doing instead, for the failure.
	rows, err := pool.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event, ''), left(query, 60)
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err == nil {
		for rows.Next() {
			var state, wait, query string
			if rows.Scan(&state, &wait, &query) == nil {
				t.Logf("backend: %s, waiting on %q: %q", state, wait, query)
			}
		}
		rows.Close()
	}
	t.Fatal("never caught the child inside a claim")
	return nil
}

// matching returns the pids of the backends of the test's database that
// match where, other than the caller's; only those among the given pids
// when among is not nil.
func matching(t *testing.T, pool *pgxpool.Pool, where string, among []int32) []int32 {
	t.Helper()
	var pids []int32
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(a.pid), '{}') FROM pg_stat_activity a
		WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND ($1::int[] IS NULL OR a.pid = ANY($1)) AND `+where, among).Scan(&pids); err != nil {
		t.Fatal(err)
	}
	return pids
}
