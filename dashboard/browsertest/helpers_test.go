package browsertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/dashboard/internal/dashtest"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// The seeding below mirrors the dashboard package's (a test file of another
// module cannot be imported); the smaller helpers are shared through
// dashboard/internal/dashtest.

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// quiet is a logger for workers that the tests make fail on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The helpers shared with the browser tests' module.
var (
	newDB     = dashtest.NewDB
	admins    = dashtest.Admins
	waitFor   = dashtest.WaitFor
	runWorker = dashtest.RunWorker
)

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
