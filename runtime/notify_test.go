package skipjack_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// claimCounter is a Hooks that counts claim statements.
type claimCounter struct{ n atomic.Int64 }

func (c *claimCounter) JobDone(string, int64, int, time.Duration, error) {}
func (c *claimCounter) Claimed(string, int, time.Duration)               { c.n.Add(1) }

// TestPlainSQLInsertIsWoken inserts a job with plain SQL, as a non-Go
// producer would, and checks that an idle worker polling only every 10s
// starts it within 2s: the insert trigger's NOTIFY woke it. It then kills
// the listening connection and checks the same after the listener
// reconnected.
func TestPlainSQLInsertIsWoken(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	ctx := context.Background()
	got := make(chan *demo.Job, 1)
	claims := &claimCounter{}
	start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		got <- job
		return nil
	}, skipjack.WorkerConfig{PollInterval: 10 * time.Second, Concurrency: 2, Hooks: claims, Logger: quietLogger(t)}))

	// Wait until the listener LISTENs and the worker's first claims are
	// over (the one at start and the one the listener's wake-up after
	// connecting causes), so that only a notification can find the job.
	waitFor(t, 10*time.Second, "the listener to LISTEN", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
	})
	waitFor(t, 10*time.Second, "the first two claims", func() bool { return claims.n.Load() >= 2 })

	checkWoken(t, pool, got)

	// Kill the listening connection: the listener must reconnect and
	// LISTEN again, and then notifications wake the worker as before.
	old := queryInt(t, pool, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`)
	before := claims.n.Load()
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the listener to LISTEN again", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> $1`, old) == 1
	})
	waitFor(t, 10*time.Second, "the claim of the wake-up after the reconnect", func() bool { return claims.n.Load() > before })
	checkWoken(t, pool, got)
}

// checkWoken inserts a job with plain SQL and checks that it starts within
// 2s (a poll would take 10s).
func checkWoken(t *testing.T, pool *pgxpool.Pool, got <-chan *demo.Job) {
	t.Helper()
	inserted := time.Now()
	if _, err := pool.Exec(context.Background(), `INSERT INTO skipjack.demo (payload) VALUES ('{"n":1}')`); err != nil {
		t.Fatal(err)
	}
	select {
	case job := <-got:
		latency := time.Since(inserted)
		t.Logf("insert to handler start: %v", latency)
		if job.Payload.N != 1 || job.Payload.Label != "" {
			t.Errorf("payload = %+v, want N 1 and a missing label decoded as empty", job.Payload)
		}
		if latency > 2*time.Second {
			t.Errorf("job started %v after the insert; the notification did not wake the worker", latency)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not start within 5s (PollInterval is 10s)")
	}
}
