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
	fmt.Fprintf(b.out, "\nNOTIFY on vs off, and River: latency at %d jobs/s for %v, and %d concurrent single-row enqueuers (one job per transaction) for %v while a worker drains the queue (median of %d run(s), systems interleaved)\n\n",
		b.o.rate, b.o.notify, notifyEnqueuers, b.o.notify, b.o.runs)
	fmt.Fprintln(b.out, "| system | notify | p50 ms | p95 ms | p99 ms | 32 enqueuers jobs/s |")
	fmt.Fprintln(b.out, "|---|---|--:|--:|--:|--:|")
	names := []string{"skipjack-default", "skipjack-poll", "river-tuned"}
	type figures struct{ p50, p95, p99, rates []float64 }
	got := make(map[string]*figures)
	var errs []error
	for r := range b.o.runs {
		for _, name := range names {
			s, ok := systemByName(b.o, name)
			if !ok {
				return fmt.Errorf("system %s is not in this build", name)
			}
			f := got[name]
			if f == nil {
				f = &figures{}
				got[name] = f
			}
			err := b.withDB(ctx, s, "notify", func(dsn string) error {
				lat, err := measureLatency(ctx, s, dsn, b.o.rate, b.o.warmup, b.o.notify)
				if err != nil {
					return fmt.Errorf("latency: %w", err)
				}
				f.p50 = append(f.p50, lat.p50.Seconds()*1000)
				f.p95 = append(f.p95, lat.p95.Seconds()*1000)
				f.p99 = append(f.p99, lat.p99.Seconds()*1000)
				return nil
			})
			if err == nil {
				err = b.withDB(ctx, s, "commits", func(dsn string) error {
					rate, err := enqueueConcurrently(ctx, s, dsn, notifyEnqueuers, b.o.notify)
					if err != nil {
						return fmt.Errorf("concurrent enqueue: %w", err)
					}
					f.rates = append(f.rates, rate)
					return nil
				})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s run %d: %w", name, r+1, err))
			}
		}
	}
	for _, name := range names {
		s, _ := systemByName(b.o, name)
		f := got[name]
		notify := "on"
		switch {
		case s.experimentOnly:
			notify = "off (poll every 1s)"
		case name == "skipjack-default":
			notify = "on (after commit, coalesced)"
		}
		fmt.Fprintf(b.out, "| %s | %s | %s | %s | %s | %s |\n", name, notify,
			ms(median(f.p50)), ms(median(f.p95)), ms(median(f.p99)), num(median(f.rates)))
	}
	fmt.Fprintln(b.out)
	return errors.Join(errs...)
}

// enqueueConcurrently runs n goroutines that each enqueue single jobs (one
// autocommit INSERT each) for d, while the system's worker drains the
// queue, and returns the total jobs per second enqueued.
func enqueueConcurrently(ctx context.Context, sys system, dsn string, n int, d time.Duration) (float64, error) {
	sys.maxConns = int32(n + 10) // the enqueuers, plus the worker draining the queue
	pool, q, err := openQueue(ctx, sys, dsn, sys.maxConns)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	workCtx, stopWork := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() { worked <- q.work(workCtx, func(int64) {}) }()
	defer func() {
		stopWork()
		<-worked
	}()
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
