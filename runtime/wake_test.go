package skipjack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// TestEnqueueWakesWorkersOfOtherProcesses enqueues on a pool that shares no
// listener with the worker (as another process would) and checks that the
// idle worker, polling only every 10s, starts the job within a second: the
// producer's post-commit NOTIFY woke it.
func TestEnqueueWakesWorkersOfOtherProcesses(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 6)
	producer := otherPool(t, pool)
	got := make(chan *demo.Job, 1)
	start(t, demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		got <- job
		return nil
	}, skipjack.WorkerConfig{PollInterval: 10 * time.Second, Concurrency: 2, Logger: quietLogger(t)}))
	waitFor(t, 10*time.Second, "the listener to LISTEN", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`) == 1
	})
	time.Sleep(200 * time.Millisecond) // let the worker's start-up claims find nothing

	enqueued := time.Now()
	if _, err := demo.Enqueue(context.Background(), producer, demo.Payload{N: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		if d := time.Since(enqueued); d > time.Second {
			t.Errorf("job started %v after Enqueue; the producer's NOTIFY did not wake the worker", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not start within 5s (PollInterval is 10s)")
	}
}

// TestEnqueueOnPoolNotifiesOnce checks that Enqueue on a pool silences the
// insert trigger and notifies once, after its commit, while a plain SQL
// insert still notifies from the trigger.
func TestEnqueueOnPoolNotifiesOnce(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 4)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LISTEN "skipjack.demo"`); err != nil {
		t.Fatal(err)
	}
	notifications := func() int {
		n := 0
		for {
			wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			_, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				return n // no further notification within 500ms
			}
			n++
		}
	}
	if _, err := demo.Enqueue(ctx, pool, demo.Payload{N: 1}); err != nil {
		t.Fatal(err)
	}
	if n := notifications(); n != 1 {
		t.Errorf("Enqueue on a pool sent %d notifications, want 1 (after the commit, none from the trigger)", n)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO skipjack.demo (payload) VALUES ('{"n":2}')`); err != nil {
		t.Fatal(err)
	}
	if n := notifications(); n != 1 {
		t.Errorf("a plain SQL insert sent %d notifications, want 1 from the trigger", n)
	}
}

// otherPool returns a second pool on pool's database whose connection
// string differs, so it shares no listener with workers on pool.
func otherPool(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	url := pool.Config().ConnString()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	cfg, err := pgxpool.ParseConfig(url + sep + "application_name=producer")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	return other
}
