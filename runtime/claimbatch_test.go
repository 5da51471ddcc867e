package skipjack_test

import (
	"context"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// startBigBatchWorkers starts n demo workers that claim up to 500 jobs at a
// time (enough to take turns while they see each other's claims); each
// handler records its job in runs and then sleeps for sleep. It returns the
// function that stops them all (start's cleanup stops them too).
func startBigBatchWorkers(t *testing.T, pool *pgxpool.Pool, n int, sleep time.Duration, runs *tally) (stop func()) {
	t.Helper()
	var stops []func()
	for range n {
		stops = append(stops, start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
			runs.add(job.ID)
			time.Sleep(sleep)
			return nil
		}, skipjack.WorkerConfig{Concurrency: 500, BatchSize: 500, Logger: quietLogger(t)})))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// TestClaimPlanIgnoresStaleStatistics checks that a claim reads the claim
// index only about as far as the jobs it takes when the table's statistics
// say the queue is empty, as they do after an ANALYZE in a quiet spell
// followed by a burst. Left to the planner, the custom plans of each new
// connection's first claims read every pending job through a bitmap and
// sort them all to lock a few.
func TestClaimPlanIgnoresStaleStatistics(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ANALYZE "skipjack"."demo"`); err != nil {
		t.Fatal(err)
	}
	const pending = 50_000
	enqueueDemo(t, pool, pending)
	runs := newTally()
	// Claims of up to 500 jobs: more than the statistics let the planner
	// expect, so that it would sort them all rather than read them in order.
	stop := startBigBatchWorkers(t, pool, 1, 20*time.Millisecond, runs)
	waitFor(t, 10*time.Second, "the first 2,000 jobs", func() bool { return runs.len() >= 2000 })
	// The worker's own connections close when it stops, and a closing
	// connection flushes its statistics.
	stop()
	const stats = `SELECT idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'demo_claim_idx'`
	var scans, read int64
	waitFor(t, 10*time.Second, "the claims' index statistics", func() bool {
		if err := pool.QueryRow(ctx, stats).Scan(&scans, &read); err != nil {
			t.Fatal(err)
		}
		return scans > 0
	})
	time.Sleep(500 * time.Millisecond) // the other connections' statistics
	if err := pool.QueryRow(ctx, stats).Scan(&scans, &read); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d claims read %d claim index entries to take %d jobs", scans, read, runs.len())
	if read >= pending/2 {
		t.Errorf("the claims read %d claim index entries to take %d of %d pending jobs; want a plan that stops near the jobs it takes", read, runs.len(), pending)
	}
}

// turnKey is the advisory lock under which the claims of the queue named
// name take turns while other processes claim it too (see the runtime's
// docs/architecture.md): a 64-bit FNV-1a hash of "skipjack:claim-turn:" and
// the name.
func turnKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("skipjack:claim-turn:" + name))
	return int64(h.Sum64())
}

// turnWaiters counts the sessions of this test's database that wait for the
// advisory lock key.
func turnWaiters(t *testing.T, pool *pgxpool.Pool, key int64) int64 {
	t.Helper()
	return queryInt(t, pool, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295`, key)
}

// holdTurn takes the turn lock key in a session of its own, as the claim
// of another process would, and returns the function that lets go of it
// (the test's cleanup calls it too).
func holdTurn(t *testing.T, pool *pgxpool.Pool, key int64) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		conn.Release()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Errorf("let go of the turn lock: %v", err)
			}
			conn.Release()
		})
	}
	t.Cleanup(release)
	return release
}

// TestCrowdedClaimsTakeTurns checks that workers that see each other's
// claims between their own, and claim hundreds of jobs at a time, take
// turns under the queue's turn lock: while another session holds it, their
// claims wait for it, and once it is gone every job still runs, and runs
// once.
func TestCrowdedClaimsTakeTurns(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	const jobs = 40_000
	enqueueDemo(t, pool, jobs)
	runs := newTally()
	// Three workers interleave their claims of 500 jobs, so each sees the
	// others' jobs between its own.
	startBigBatchWorkers(t, pool, 3, 50*time.Millisecond, runs)
	waitFor(t, 30*time.Second, "the workers to run 12,000 jobs", func() bool { return runs.len() >= 12_000 })

	key := turnKey("demo")
	release := holdTurn(t, pool, key)
	waitFor(t, 10*time.Second, "a claim to wait for its turn", func() bool {
		return turnWaiters(t, pool, key) > 0
	})
	if n := runs.len(); n == jobs {
		t.Fatalf("all %d jobs ran while another session held the turn lock", n)
	}
	release()
	waitFor(t, time.Minute, "every job to run", func() bool { return runs.len() == jobs })
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
}

// TestStartingWorkerTakesTurns checks that a worker that claims hundreds of
// jobs at a time takes turns from its first claim, before its claims could
// show whether other processes claim the queue too: workers that start
// together meet the backlog together. While another session holds the
// queue's turn lock, a starting worker runs nothing; once the lock is gone,
// it runs every job.
func TestStartingWorkerTakesTurns(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	const jobs = 1000
	enqueueDemo(t, pool, jobs)
	key := turnKey("demo")
	release := holdTurn(t, pool, key)
	runs := newTally()
	startBigBatchWorkers(t, pool, 1, 0, runs)
	waitFor(t, 10*time.Second, "the first claim to wait for its turn", func() bool {
		return turnWaiters(t, pool, key) > 0
	})
	if n := runs.len(); n != 0 {
		t.Fatalf("%d jobs ran while another session held the turn lock, want 0", n)
	}
	release()
	waitFor(t, 30*time.Second, "every job to run", func() bool { return runs.len() == jobs })
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
}

// TestStalledTurnDoesNotStopClaims checks that a session that holds the
// queue's turn lock and does not let go, as the backend of a claim whose
// client stopped reading its rows does (a frozen process, a host cut off
// the network: the server blocks writing the rows until TCP gives up,
// which can take many minutes), does not stop the queue. Three workers
// that claim 500 jobs at a time see each other's claims and take turns; a
// claim that waits longer than turnWait (2 s here) claims without a turn,
// and its worker claims without turns for a while, so the workers run
// every job while the lock is still held, sooner than one wait per claim
// would allow.
func TestStalledTurnDoesNotStopClaims(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	const jobs = 15_000
	enqueueDemo(t, pool, jobs)
	key := turnKey("demo")
	holdTurn(t, pool, key)
	runs := newTally()
	startBigBatchWorkers(t, pool, 3, 0, runs)
	waitFor(t, 10*time.Second, "a claim to wait for its turn", func() bool {
		return turnWaiters(t, pool, key) > 0
	})
	// 30 claims of 500: one 2 s wait per claim would take 20 s.
	waitFor(t, 10*time.Second, "every job to run while the turn lock is held", func() bool { return runs.len() == jobs })
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
}
