package skipjack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
)

// TestStatementCancelledOnServer holds a lock on a job's row while its
// worker acknowledges it: the acknowledgement waits for the lock past its
// 1s deadline (half the fast queue's 2s lease). The worker must then cancel
// the statement on the server, not merely close its socket: otherwise the
// server backend keeps waiting for the lock (and would take it and write
// once the lock is released), and every retry leaves one more such backend
// behind. Once the lock is released the job is acknowledged.
//
// pgx (5.12) also sends a cancel request when it closes a connection whose
// statement timed out, so the server side looks the same with its default
// context handling; the worker's control pool cancels without losing the
// connection. Before the fix the acknowledgement waited 15s.
func TestStatementCancelledOnServer(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 10)
	ctx := context.Background()
	logs := newLogs(t)
	running := make(chan int64, 1)
	proceed := make(chan struct{})
	start(t, fast.NewWorker(pool, func(hctx context.Context, job *fast.Job) error {
		select {
		case running <- job.ID:
			<-proceed
		default: // a rerun after a rescue
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, Logger: logs.logger()}))
	id := enqueueFast(t, pool)
	<-running

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM skipjack.fast WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	close(proceed)

	waitFor(t, 8*time.Second, "two acknowledgements to give up on the lock", func() bool {
		return strings.Count(logs.String(), "flushing job results failed") >= 2
	})
	// The first statement waited from about 2.1s ago until its 1s deadline.
	// Cancelled on the server, nothing has been waiting for longer than
	// that since.
	waiting := queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND now() - query_start > interval '1500ms'`)
	if waiting != 0 {
		t.Errorf("%d server backends still wait for the lock after their statements' deadlines passed, want 0; logs:\n%s", waiting, logs)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the job to be acknowledged", func() bool {
		_, ok := getJob(t, pool, "fast", id)
		return !ok
	})
}
