package skipjack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestCompleteTxCountsUnderPinnedHorizon acknowledges 3,000 jobs with
// CompleteTx in one database session while another session pins the xmin
// horizon, and bounds what the acknowledgements' upserts of the counts
// table read per job. Each upsert walks every version of its counts row
// that the pin keeps; with one row per session and minute the walk grew
// with every acknowledgement of the minute (about 50 buffers per job here,
// and up to 128 per call under a 5-minute pin in the scenario runner,
// issue 42), while a session that moves to a new row every 512
// acknowledgements walks at most 512 versions. The counts must still add up
// to every job.
//
// Buffers are counted, not timed, so the bound holds on a loaded machine.
// The test starts in the first 40 seconds of a minute (on the database's
// clock) so that all its acknowledgements usually share one; if a new
// minute starts among them, the rows split there too and the bound holds
// either way.
func TestCompleteTxCountsUnderPinnedHorizon(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 8)
	ctx := context.Background()
	const jobs = 3000
	ps := make([]demo.Payload, jobs)
	for i := range ps {
		ps[i] = demo.Payload{N: int64(i), Label: "counted"}
	}
	if _, err := demo.EnqueueMany(ctx, pool, ps); err != nil {
		t.Fatal(err)
	}
	// One session acknowledges every job, one at a time.
	session, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	// Close does nothing on a closed connection, so the cleanup is safe
	// after the close below.
	t.Cleanup(func() { _ = session.Close(context.Background()) })
	waitFor(t, 25*time.Second, "the first 40 seconds of a minute", func() bool {
		return queryInt(t, pool, `SELECT extract(second FROM clock_timestamp())::integer`) < 40
	})
	pinHorizon(t, pool)
	before := readTableBuffers(t, pool, "_skipjack_counts")

	var mu sync.Mutex
	runs := newTally()
	stop := start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		mu.Lock()
		defer mu.Unlock()
		tx, err := session.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := demo.CompleteTx(ctx, tx, job); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		runs.add(job.ID)
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, BatchSize: 50, Logger: quietLogger(t)}))
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d jobs", jobs), func() bool { return runs.len() >= jobs })
	stop()
	// A closing connection flushes its statistics.
	if err := session.Close(ctx); err != nil {
		t.Fatal(err)
	}
	perJob := float64(readTableBuffers(t, pool, "_skipjack_counts")-before) / jobs
	t.Logf("the counts table and its index: %.1f buffers per acknowledgement", perJob)
	const most = 20
	if perJob > most {
		t.Errorf("with the horizon pinned, each CompleteTx read %.1f buffers of the counts table, want at most %d", perJob, most)
	}
	if n := queryInt(t, pool, `SELECT coalesce(sum("completed"), 0) FROM skipjack._skipjack_counts WHERE "queue" = 'demo'`); n != jobs {
		t.Errorf("the counts table holds %d completed demo jobs, want %d", n, jobs)
	}
	rows := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_counts WHERE "queue" = 'demo' AND "worker" LIKE 'session/%'`)
	if rows < jobs/512 {
		t.Errorf("the session counted its %d acknowledgements in %d rows, want at least %d (one per 512)", jobs, rows, jobs/512)
	}
}
