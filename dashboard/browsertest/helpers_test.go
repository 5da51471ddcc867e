package browsertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/syncaccount"
)

// The helpers below are the dashboard package's test helpers
// (dashboard/postgres_test.go), which a test file of another module cannot
// import; they seed the dashboard's test queues the same way.

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// quiet is a logger for workers that the tests make fail on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newDB returns a pool on a fresh database with the test queues migrated.
func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := skipjacktest.NewPool(t)
	if err := testjobs.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return pool
}

// admins returns the admin views of the test queues on db.
func admins(db skipjack.DBTX) []skipjack.QueueAdmin {
	return []skipjack.QueueAdmin{sendemail.Admin(db), resizeimage.Admin(db), syncaccount.Admin(db)}
}

// waitFor polls cond until it holds, failing the test after 30s.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWorker runs run (a worker's Run) until stop is called; stop returns
// after Run has.
func runWorker(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// workerConfig is a worker that polls often, so retries run soon.
var workerConfig = skipjack.WorkerConfig{Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: quiet, WorkerID: "dashboard-browser-test-worker"}

// seeded is a database with jobs in every state the pages show.
type seeded struct {
	pool   *pgxpool.Pool
	failed int64 // send_email, failed after 2 attempts
}

// seed fills a fresh database: a send_email job that a worker failed twice
// ("smtp: 550 mailbox unavailable"), two pending and one scheduled
// send_email jobs, one completed and one pending resize_image job.
func seed(t *testing.T) seeded {
	t.Helper()
	ctx := t.Context()
	s := seeded{pool: newDB(t)}
	var err error
	s.failed, err = sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "ada@example.com", Subject: "Your order", Tags: []string{"order", "eu"}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, sendemail.NewWorker(s.pool, func(context.Context, *sendemail.Job) error {
		return errors.New("smtp: 550 mailbox unavailable")
	}, workerConfig).Run)
	waitFor(t, "the send_email job has failed", func() (bool, error) {
		rec, err := sendemail.Get(ctx, s.pool, s.failed)
		return err == nil && rec.State == skipjack.StateFailed, err
	})
	stop()

	completed, err := resizeimage.Enqueue(ctx, s.pool, resizeimage.Payload{ImageID: 7, Width: 640})
	if err != nil {
		t.Fatal(err)
	}
	stop = runWorker(t, resizeimage.NewWorker(s.pool, func(context.Context, *resizeimage.Job) error { return nil }, workerConfig).Run)
	waitFor(t, "the resize_image job has completed", func() (bool, error) {
		rec, err := resizeimage.Get(ctx, s.pool, completed)
		return err == nil && rec.State == skipjack.StateCompleted, err
	})
	stop()

	for i := range 2 {
		if _, err := sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "bob" + strconv.Itoa(i) + "@example.com", Subject: "Hello"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err = sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "cy@example.com"}, skipjack.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err = resizeimage.Enqueue(ctx, s.pool, resizeimage.Payload{ImageID: 8, Width: 320}, skipjack.Priority(3)); err != nil {
		t.Fatal(err)
	}
	return s
}
