package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// payload is the job every system runs: a no-op whose n carries either a
// sequence number (burn-down) or the producer's clock at enqueue in
// nanoseconds (latency; negative for warm-up jobs that are not measured).
type payload struct {
	N     int64  `json:"n"`
	Label string `json:"label"`
}

// system is one contender of the benchmark.
type system struct {
	// name identifies the system on the command line and in the table.
	name string
	// retention says what happens to a finished job's row.
	retention string
	// maxConns sizes the pool the system runs on; 0 keeps pgxpool's default.
	maxConns int32
	// migrate creates the system's tables in a fresh database.
	migrate func(ctx context.Context, pool *pgxpool.Pool) error
	// open binds the system to a pool.
	open func(pool *pgxpool.Pool) (queue, error)
	// experimentOnly keeps the system out of the main table unless it is
	// named with -systems.
	experimentOnly bool
}

// queue is a system bound to one database.
type queue interface {
	// enqueueMany inserts ps with the system's bulk API.
	enqueueMany(ctx context.Context, ps []payload) error
	// enqueue inserts one job with the system's single-insert API.
	enqueue(ctx context.Context, p payload) error
	// work runs the system's workers, calling handle with each job's n,
	// until ctx is cancelled; it returns after a clean stop.
	work(ctx context.Context, handle func(n int64)) error
	// unfinished counts jobs that are neither completed nor failed.
	unfinished(ctx context.Context) (int64, error)
	// fillFinished inserts n finished (completed or failed) rows, as a queue
	// accumulates them when it keeps its history, and vacuums the table.
	fillFinished(ctx context.Context, n int) error
	// claimStats returns the number of claim statements and their total time
	// since the queue was opened, when the system reports them.
	claimStats() (claims int64, took time.Duration, ok bool)
}

// errNoError stands for a nil error where a stop was not expected.
var errNoError = errors.New("returned without an error")

// throughput is the result of one enqueue + burn-down run.
type throughput struct {
	enqueue float64 // jobs/s with the bulk API
	burn    float64 // jobs/s from starting the workers until no job is left
	claimMS float64 // mean claim statement time, ms (0 when unknown)
	// CPU microseconds per job during the burn-down: this process (the
	// workers) and the rest of the machine (mostly the server).
	workerCPU, serverCPU float64
}

// openQueue connects a pool of at most maxConns connections to dsn,
// applies sys's migrations and opens its queue there; the caller closes
// the pool. On error nothing is left open.
func openQueue(ctx context.Context, sys system, dsn string, maxConns int32) (*pgxpool.Pool, queue, error) {
	pool, err := openPool(ctx, dsn, maxConns)
	if err != nil {
		return nil, nil, err
	}
	if err := sys.migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	q, err := sys.open(pool)
	if err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("open: %w", err)
	}
	return pool, q, nil
}

// measureThroughput bulk-enqueues n jobs in batches, then starts the workers
// and times until every job has run and the database holds no unfinished job.
func measureThroughput(ctx context.Context, sys system, dsn string, n, batch int, fill int, timeout time.Duration) (throughput, error) {
	var res throughput
	pool, q, err := openQueue(ctx, sys, dsn, sys.maxConns)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if fill > 0 {
		if err := q.fillFinished(ctx, fill); err != nil {
			return res, fmt.Errorf("fill %d finished rows: %w", fill, err)
		}
	}
	took, err := enqueueBulk(ctx, q, n, batch)
	if err != nil {
		return res, err
	}
	res.enqueue = float64(n) / took.Seconds()

	// CPU per job needs Linux's /proc; elsewhere its columns stay empty.
	cpu, cpuErr := startCPU()
	burn, err := burnDown(ctx, q, n, timeout)
	if err != nil {
		return res, err
	}
	res.burn = float64(n) / burn.Seconds()
	if cpuErr == nil {
		if w, s, err := cpu.perJob(n); err == nil {
			res.workerCPU, res.serverCPU = w, s
		}
	}
	if c, t, ok := q.claimStats(); ok && c > 0 {
		res.claimMS = float64(t.Microseconds()) / 1000 / float64(c)
	}
	return res, nil
}

// enqueueBulk inserts n jobs in batches of batch and returns how long it took.
func enqueueBulk(ctx context.Context, q queue, n, batch int) (time.Duration, error) {
	ps := make([]payload, n)
	for i := range ps {
		ps[i] = payload{N: int64(i + 1), Label: "bench"}
	}
	start := time.Now()
	for i := 0; i < n; i += batch {
		if err := q.enqueueMany(ctx, ps[i:min(i+batch, n)]); err != nil {
			return 0, fmt.Errorf("enqueue batch at %d: %w", i, err)
		}
	}
	return time.Since(start), nil
}

// burnDown starts the workers of q and returns how long they took to finish
// n jobs: until the handler ran n times and the database reports no
// unfinished job (so batched acknowledgements are included).
func burnDown(ctx context.Context, q queue, n int, timeout time.Duration) (time.Duration, error) {
	var done atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	werr := make(chan error, 1)
	start := time.Now()
	go func() { werr <- q.work(wctx, func(int64) { done.Add(1) }) }()
	took, err := waitFinished(ctx, q, func() bool { return done.Load() >= int64(n) }, start, timeout, werr)
	stop()
	if err != nil {
		return 0, err
	}
	select {
	case err := <-werr:
		if err != nil {
			return 0, fmt.Errorf("workers stopped: %w", err)
		}
	case <-time.After(time.Minute):
		return 0, errors.New("workers did not stop within 1m")
	}
	return took, nil
}

// waitFinished waits until ready reports true (checked often, cheaply) and
// then until the database reports no unfinished job, and returns the time
// since start. ready may be nil: then the database is polled from the
// beginning, every 20ms. It gives up at timeout, or sooner when no job
// finished for stallAfter (a system that stopped making progress).
func waitFinished(ctx context.Context, q unfinishedCounter, ready func() bool, start time.Time, timeout time.Duration, werr <-chan error) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var lastPoll, lastCheck time.Time
	lastLeft, progressAt := int64(-1), time.Now()
	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case err := <-werr:
			return 0, fmt.Errorf("workers stopped early: %w", cmp.Or(err, errNoError))
		case now := <-tick.C:
			if now.After(deadline) {
				left, _ := q.unfinished(ctx)
				return 0, fmt.Errorf("timed out after %v with %d jobs unfinished", timeout, left)
			}
			if now.Sub(lastCheck) >= stallCheck {
				lastCheck = now
				left, err := q.unfinished(ctx)
				if err != nil {
					return 0, fmt.Errorf("count unfinished: %w", err)
				}
				if left != lastLeft {
					lastLeft, progressAt = left, now
				} else if now.Sub(progressAt) >= stallAfter {
					return 0, fmt.Errorf("stalled: %d jobs unfinished, none finished in the last %v", left, stallAfter)
				}
			}
			if ready != nil && !ready() {
				continue
			}
			if ready == nil && now.Sub(lastPoll) < 20*time.Millisecond {
				continue
			}
			lastPoll = now
			left, err := q.unfinished(ctx)
			if err != nil {
				return 0, fmt.Errorf("count unfinished: %w", err)
			}
			if left == 0 {
				return time.Since(start), nil
			}
		}
	}
}

// stallAfter is how long waitFinished waits for the next job to finish
// before it calls the burn-down stalled.
const stallAfter = 30 * time.Second

// stallCheck is how often waitFinished counts the unfinished jobs to see
// whether the burn-down stalled: rarely, since the count is server CPU the
// burn-down's figures include.
const stallCheck = 5 * time.Second

// unfinishedCounter counts the jobs of one queue, or several, that are
// neither completed nor failed.
type unfinishedCounter interface {
	unfinished(ctx context.Context) (int64, error)
}

// queues counts the unfinished jobs of all its queues.
type queues []queue

func (qs queues) unfinished(ctx context.Context) (int64, error) {
	var sum int64
	for _, q := range qs {
		n, err := q.unfinished(ctx)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// latency is the enqueue->start latency distribution of one run.
type latency struct {
	p50, p95, p99 time.Duration
	samples       int
}

// measureLatency starts the workers on an empty queue, then enqueues single
// jobs at rate per second for warmup+dur, and measures for each job enqueued
// after warmup the time from just before its INSERT to the start of its
// handler.
func measureLatency(ctx context.Context, sys system, dsn string, rate int, warmup, dur time.Duration) (latency, error) {
	var res latency
	pool, q, err := openQueue(ctx, sys, dsn, sys.maxConns)
	if err != nil {
		return res, err
	}
	defer pool.Close()

	nWarm := int(warmup.Seconds() * float64(rate))
	nMeasure := int(dur.Seconds() * float64(rate))
	total := nWarm + nMeasure
	samples := make([]int64, nMeasure)
	var next, received atomic.Int64
	handle := func(n int64) {
		if n > 0 {
			d := time.Now().UnixNano() - n
			if i := next.Add(1) - 1; i < int64(len(samples)) {
				samples[i] = d
			}
		}
		received.Add(1)
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	werr := make(chan error, 1)
	go func() { werr <- q.work(wctx, handle) }()

	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		now := time.Now().UnixNano()
		if i < nWarm {
			now = -now
		}
		if err := q.enqueue(ctx, payload{N: now, Label: "bench"}); err != nil {
			return res, fmt.Errorf("enqueue job %d: %w", i, err)
		}
		select {
		case err := <-werr:
			return res, fmt.Errorf("workers stopped early: %w", cmp.Or(err, errNoError))
		default:
		}
	}
	if _, err := waitFinished(ctx, q, func() bool { return received.Load() >= int64(total) }, start, 30*time.Second, werr); err != nil {
		return res, fmt.Errorf("waiting for the last latency jobs: %w", err)
	}
	stop()
	select {
	case err := <-werr:
		if err != nil {
			return res, fmt.Errorf("workers stopped: %w", err)
		}
	case <-time.After(time.Minute):
		return res, errors.New("workers did not stop within 1m")
	}

	got := samples[:min(next.Load(), int64(len(samples)))]
	if len(got) == 0 {
		return res, errors.New("no latency samples")
	}
	slices.Sort(got)
	res.samples = len(got)
	res.p50 = time.Duration(percentile(got, 0.50))
	res.p95 = time.Duration(percentile(got, 0.95))
	res.p99 = time.Duration(percentile(got, 0.99))
	return res, nil
}

// percentile returns the nearest-rank p-quantile of sorted xs.
func percentile(xs []int64, p float64) int64 {
	i := int(float64(len(xs))*p+0.999999) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
