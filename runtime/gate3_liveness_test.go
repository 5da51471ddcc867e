package skipjack_test

import (
	"context"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestGate3StoppingWorkerPrunesOldRows checks the upkeep of the workers
// table (docs/reference.md, "Liveness"): a worker that stops marks its own
// row stopped and deletes the rows of workers that expired more than an
// hour ago, and only those: a worker that expired half an hour ago may
// still hold jobs that its row lets rescue count right.
func TestGate3StoppingWorkerPrunesOldRows(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO skipjack._skipjack_workers (id, expires_at) VALUES
		('old/1', now() - interval '2 hours'), ('recent/1', now() - interval '30 minutes')`); err != nil {
		t.Fatal(err)
	}
	stop := start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error { return nil },
		skipjack.WorkerConfig{Logger: quietLogger(t)}))
	waitFor(t, 30*time.Second, "the worker's row", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workers`) == 3
	})
	stop()
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workers WHERE stopped_at IS NOT NULL AND expires_at <= now()`); n != 1 {
		t.Errorf("%d stopped rows after the worker stopped, want its own", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workers WHERE id = 'old/1'`); n != 0 {
		t.Error("the row of a worker expired 2 hours ago is still there")
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_workers WHERE id = 'recent/1'`); n != 1 {
		t.Error("the row of a worker expired 30 minutes ago was deleted, want it kept for an hour")
	}
}
