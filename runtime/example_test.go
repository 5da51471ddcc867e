package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
)

// This example uses the generated packages of a config with one queue,
// demo, whose payload is {n int64, label string}: it applies the
// migrations, enqueues three jobs and works them until all are done.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, exampleDatabaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := testqueue.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}

	for i := 1; i <= 3; i++ {
		if _, err := demo.Enqueue(ctx, pool, demo.Payload{N: int64(i), Label: "hello"}); err != nil {
			log.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	var sum, done atomic.Int64
	w := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		sum.Add(job.Payload.N)
		if done.Add(1) == 3 {
			stop() // Run finishes its jobs, acknowledges them and returns
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	if err := w.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	stats, err := demo.Stats(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sum %d, pending %d, running %d\n", sum.Load(), stats.Pending, stats.Running)
	// Output: sum 6, pending 0, running 0
}

// Handlers return Snooze to run a job again later without counting the
// attempt, and Permanent to fail it without retrying. Any other error is
// retried with exponential backoff until the queue's max_attempts.
func ExampleSnooze() {
	handle := func(ctx context.Context, job *demo.Job) error {
		switch {
		case job.Payload.Label == "":
			return skipjack.Permanent(errors.New("label is required"))
		case job.Payload.N > 100:
			return skipjack.Snooze(time.Minute) // not ready yet
		}
		return nil
	}
	_ = handle
}
