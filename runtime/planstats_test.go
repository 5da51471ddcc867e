package skipjack_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// TestAcksSkipUniqueIndexWithoutStatistics: on a unique queue whose unique
// states include running, in a table the planner has no statistics for (a
// new table, autovacuum off or behind), a worker that burns down jobs never
// scans the unique index. That index holds every pending job's entry, and
// its predicate (state pending or running) is implied by "state =
// 'running'": without statistics the planner ANDed it with the primary key
// in every Complete, which then read 100,000 entries to acknowledge 100
// jobs (23 ms against 1). The statements compare the state with a value no
// predicate matches.
func TestAcksSkipUniqueIndexWithoutStatistics(t *testing.T) {
	t.Parallel()
	const pending, burn = 20_000, 500
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `ALTER TABLE skipjack.uniq SET (autovacuum_enabled = false)`); err != nil {
		t.Fatalf("turn autovacuum off: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO skipjack.uniq (payload) SELECT jsonb_build_object('key', 'k' || g, 'n', g) FROM generate_series(1, $1::int) AS g`, pending); err != nil {
		t.Fatalf("enqueue %d jobs: %v", pending, err)
	}
	if n := queryInt(t, pool, `SELECT reltuples::bigint FROM pg_class WHERE oid = 'skipjack.uniq'::regclass`); n >= 0 {
		t.Fatalf("the uniq table has statistics (reltuples %d): the test needs a table never analyzed", n)
	}
	scans := func() int64 {
		return queryInt(t, pool, `SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'uniq_unique_idx'`)
	}
	before := scans()

	// The worker runs on a pool of its own, closed before the counters
	// are read: a backend reports its counters when it exits.
	workerPool, err := pgxpool.NewWithConfig(ctx, pool.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer workerPool.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var done atomic.Int64
	w := uniq.NewWorker(workerPool, func(context.Context, *uniq.Job) error {
		if done.Add(1) == burn {
			stop()
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 10, Logger: quietLogger(t)})
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%d of %d jobs handled after 2 minutes", done.Load(), burn)
	}
	workerPool.Close()
	deadline := time.Now().Add(30 * time.Second)
	for queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`) > int64(pool.Stat().TotalConns()) {
		if time.Now().After(deadline) {
			t.Fatal("the worker's server backends did not exit within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	acked := pending - queryInt(t, pool, `SELECT count(*) FROM skipjack.uniq WHERE state = 'pending'`)
	if acked < burn {
		t.Fatalf("%d jobs left the pending state, want at least %d", acked, burn)
	}
	if got := scans() - before; got != 0 {
		t.Errorf("the unique index was scanned %d times while a worker acknowledged %d jobs, want 0", got, acked)
	}
}
