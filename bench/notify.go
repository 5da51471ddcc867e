package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// notifyEnqueuers is how many goroutines enqueue at once in the notify
// experiment's commit-throughput test.
const notifyEnqueuers = 32

// notifyOnOff compares a queue that NOTIFYs its workers on insert
// (skipjack-default) with one that only polls (skipjack-poll, notify:
// false): the enqueue-to-start latency at -rate single inserts per second,
// and how many single-row enqueues per second 32 concurrent goroutines
// commit with no worker running (NOTIFY takes a global lock at commit, so it
// serializes committing transactions).
func (b *bench) notifyOnOff(ctx context.Context) error {
	fmt.Fprintf(b.out, "\nNOTIFY on vs off: latency at %d jobs/s for %v, and %d concurrent single-row enqueuers for %v (median of %d run(s))\n\n",
		b.o.rate, b.o.notify, notifyEnqueuers, b.o.notify, b.o.runs)
	fmt.Fprintln(b.out, "| system | notify | p50 ms | p95 ms | p99 ms | 32 enqueuers jobs/s |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|")
	var errs []error
	for _, name := range []string{"skipjack-default", "skipjack-poll"} {
		s, ok := systemByName(b.o, name)
		if !ok {
			return fmt.Errorf("system %s is not in this build", name)
		}
		var p50, p95, p99, rates []float64
		for r := range b.o.runs {
			err := b.withDB(ctx, s, "notify", func(dsn string) error {
				lat, err := measureLatency(ctx, s, dsn, b.o.rate, b.o.warmup, b.o.notify)
				if err != nil {
					return fmt.Errorf("latency: %w", err)
				}
				p50 = append(p50, lat.p50.Seconds()*1000)
				p95 = append(p95, lat.p95.Seconds()*1000)
				p99 = append(p99, lat.p99.Seconds()*1000)
				return nil
			})
			if err == nil {
				err = b.withDB(ctx, s, "commits", func(dsn string) error {
					rate, err := enqueueConcurrently(ctx, s, dsn, notifyEnqueuers, b.o.notify)
					if err != nil {
						return fmt.Errorf("concurrent enqueue: %w", err)
					}
					rates = append(rates, rate)
					return nil
				})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s run %d: %w", name, r+1, err))
			}
		}
		notify := "on"
		if s.experimentOnly {
			notify = "off (poll every 1s)"
		}
		fmt.Fprintf(b.out, "| %s | %s | %s | %s | %s | %s |\n", name, notify,
			ms(median(p50)), ms(median(p95)), ms(median(p99)), num(median(rates)))
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// enqueueConcurrently runs n goroutines that each enqueue single jobs (one
// autocommit INSERT each) for d and returns the total jobs per second.
func enqueueConcurrently(ctx context.Context, sys system, dsn string, n int, d time.Duration) (float64, error) {
	sys.maxConns = int32(n + 2)
	pool, err := openPool(ctx, dsn, sys.maxConns)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if err := sys.migrate(ctx, pool); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	q, err := sys.open(pool)
	if err != nil {
		return 0, fmt.Errorf("open: %w", err)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	deadline := start.Add(d)
	for i := range n {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := q.enqueue(ctx, payload{N: 0, Label: "bench"}); err != nil {
					errs[i] = err
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}
