// Command shop is skipjack's example: three typed queues generated from
// skipjack.yaml. It applies the generated migrations, enqueues a few
// thousand jobs, works them with one worker per queue until every queue is
// drained, printing progress, and prints a summary.
//
// It finds PostgreSQL as skipjack's tests do: $DATABASE_URL, else
// 127.0.0.1:5432 as postgres, else a throwaway cluster it starts itself;
// there it works in a database of its own, skipjacktest_shop_<random>
// ($SKIPJACK_TEST_PREFIX sets the prefix), which it drops at the end.
package main

//go:generate go run github.com/skipjack-dev/skipjack/cmd/skipjack generate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs"
	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/chargecard"
	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/resizeimage"
	"github.com/skipjack-dev/skipjack/examples/shop/internal/jobs/sendemail"
)

// How many jobs the example enqueues per queue.
const (
	emails  = 5000
	images  = 500
	charges = 1000
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := connectAndRun(ctx)
	skipjacktest.Stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shop:", err)
		os.Exit(1)
	}
}

// connectAndRun finds PostgreSQL, creates a database of the example's own
// there (named by skipjacktest.Prefix, so a shared server can tell it
// apart), runs the example in it and drops it.
func connectAndRun(ctx context.Context) (err error) {
	url, drop, err := skipjacktest.CreateDatabase(ctx, "shop_")
	if err != nil {
		return err
	}
	defer func() {
		if dropErr := drop(context.WithoutCancel(ctx)); err == nil {
			err = dropErr
		}
	}()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	_, err = run(ctx, pool, os.Stdout)
	return err
}

// summary counts what the handlers did.
type summary struct {
	sent, resized, charged, refused int64
}

// run migrates, enqueues the example's jobs and works them until every
// queue is drained, printing progress to out.
func run(ctx context.Context, pool *pgxpool.Pool, out io.Writer) (summary, error) {
	if err := jobs.Migrate(ctx, pool); err != nil {
		return summary{}, fmt.Errorf("migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS shop_ledger (order_id bigint PRIMARY KEY, amount_cents bigint NOT NULL)`); err != nil {
		return summary{}, fmt.Errorf("create ledger: %w", err)
	}
	if err := enqueue(ctx, pool); err != nil {
		return summary{}, err
	}

	var sent, resized, charged, refused atomic.Int64
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Three workers share the pool: their handlers may hold 3*12 = 36 of its
	// 40 connections (only charge_card's use it), below the size the
	// runtime warns about; each worker's claims, acks and heartbeats run on
	// a small control pool of its own. RunGroup caps them at 24 handlers in
	// total, shared fairly, and charge_card's limits (skipjack.yaml) at 8
	// charges at once across every process.
	wcfg := skipjack.WorkerConfig{Concurrency: 12, Logger: logger}
	workers := []skipjack.GroupWorker{
		sendemail.NewWorker(pool, func(ctx context.Context, job *sendemail.Job) error {
			sent.Add(1) // a real handler would talk to a mail server here
			return nil
		}, wcfg),
		resizeimage.NewWorker(pool, func(ctx context.Context, job *resizeimage.Job) error {
			if job.Payload.Width <= 0 {
				refused.Add(1)
				return skipjack.Permanent(fmt.Errorf("image %d: width %d is not positive", job.Payload.ImageID, job.Payload.Width))
			}
			resized.Add(1)
			return nil
		}, wcfg),
		chargecard.NewWorker(pool, func(ctx context.Context, job *chargecard.Job) error {
			// The charge and its ack commit together: a crash between them
			// can never charge twice.
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO shop_ledger (order_id, amount_cents) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
					job.Payload.OrderID, job.Payload.AmountCents); err != nil {
					return err
				}
				charged.Add(1)
				return chargecard.CompleteTx(ctx, tx, job)
			})
		}, wcfg),
	}

	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		if err := skipjack.RunGroup(workCtx, skipjack.GroupConfig{Concurrency: 24}, workers...); err != nil {
			fmt.Fprintln(os.Stderr, "workers:", err)
		}
	}()
	start := time.Now()
	err := waitDrained(ctx, pool, func(left int64) {
		fmt.Fprintf(out, "%6.1fs  sent %5d  resized %4d  charged %5d  refused %3d  left %5d\n",
			time.Since(start).Seconds(), sent.Load(), resized.Load(), charged.Load(), refused.Load(), left)
	})
	cancel()
	<-ran
	if err != nil {
		return summary{}, err
	}
	sum := summary{sent: sent.Load(), resized: resized.Load(), charged: charged.Load(), refused: refused.Load()}
	took := time.Since(start)
	total := sum.sent + sum.resized + sum.charged + sum.refused
	fmt.Fprintf(out, "\ndone: %d jobs in %v (%.0f jobs/s): %d emails sent, %d images resized, %d refused permanently, %d cards charged\n",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), sum.sent, sum.resized, sum.refused, sum.charged)
	for _, name := range []string{sendemail.Name, resizeimage.Name, chargecard.Name} {
		s, err := statsFuncs[name](ctx, pool)
		if err != nil {
			return sum, fmt.Errorf("stats %s: %w", name, err)
		}
		fmt.Fprintf(out, "  %-13s pending %d, scheduled %d, running %d, completed (kept) %d, failed (kept) %d\n",
			name, s.Pending, s.Scheduled, s.Running, s.Completed, s.Failed)
	}
	return sum, nil
}

// enqueue adds the example's jobs: emails in one COPY, images one by one
// with priorities (every 50th has a bad width and will be refused), charges
// in one COPY.
func enqueue(ctx context.Context, pool *pgxpool.Pool) error {
	zip := "10115"
	mails := make([]sendemail.Payload, emails)
	for i := range mails {
		mails[i] = sendemail.Payload{
			To:      fmt.Sprintf("customer%d@example.com", i),
			Subject: "Your order shipped",
			ShipTo:  sendemail.Address{Street: "Example Str. 1", Zip: &zip},
		}
	}
	if _, err := sendemail.EnqueueMany(ctx, pool, mails); err != nil {
		return err
	}
	for i := range images {
		width := 640
		if i%50 == 0 {
			width = 0
		}
		p := resizeimage.Payload{ImageID: int64(i), URL: fmt.Sprintf("https://img.example.com/%d.png", i), Width: width}
		if _, err := resizeimage.Enqueue(ctx, pool, p, skipjack.Priority(i%10)); err != nil {
			return err
		}
	}
	charges := make([]chargecard.Payload, charges)
	base := time.Now().UnixNano()
	for i := range charges {
		charges[i] = chargecard.Payload{OrderID: base + int64(i), AmountCents: int64(100 + i), Currency: "EUR"}
	}
	_, err := chargecard.EnqueueMany(ctx, pool, charges)
	return err
}

// statsFuncs counts the jobs of each queue by state.
var statsFuncs = map[string]func(context.Context, *pgxpool.Pool) (skipjack.Stats, error){
	sendemail.Name:   func(ctx context.Context, p *pgxpool.Pool) (skipjack.Stats, error) { return sendemail.Stats(ctx, p) },
	resizeimage.Name: func(ctx context.Context, p *pgxpool.Pool) (skipjack.Stats, error) { return resizeimage.Stats(ctx, p) },
	chargecard.Name:  func(ctx context.Context, p *pgxpool.Pool) (skipjack.Stats, error) { return chargecard.Stats(ctx, p) },
}

// waitDrained reports progress every half second until no queue has a
// pending, scheduled or running job.
func waitDrained(ctx context.Context, pool *pgxpool.Pool, progress func(left int64)) error {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		var left int64
		for _, stats := range statsFuncs {
			s, err := stats(ctx, pool)
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			left += s.Pending + s.Scheduled + s.Running
		}
		progress(left)
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-tick.C:
		}
	}
}
