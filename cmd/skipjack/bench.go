package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/benchqueue"
	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/benchqueue/probe"
)

// benchOptions are the flags of skipjack bench.
type benchOptions struct {
	jobs, latencyJobs, concurrency int
}

func benchFlags(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.bench.jobs, "jobs", 20_000, "jobs in the burn-down")
	fs.IntVar(&o.bench.latencyJobs, "latency-jobs", 200, "jobs in the latency run, enqueued one at a time")
	fs.IntVar(&o.bench.concurrency, "concurrency", 100, "the worker's WorkerConfig.Concurrency")
}

// benchCleanupTimeout bounds dropping the throwaway schema at the end,
// also after Ctrl-C.
const benchCleanupTimeout = 30 * time.Second

// bench runs skipjack's throughput and latency benchmark on o's database,
// in a throwaway schema that it drops at the end, also when interrupted.
func bench(o options, e env) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runBench(ctx, o.dbURL, o.bench, e, nil)
}

// benchResult is what one bench run measured.
type benchResult struct {
	enqueueRate, burnRate float64       // jobs/s
	burn                  time.Duration // worker start until the last job was acknowledged
	p50, p99, max         time.Duration // pickup latency
}

// runBench runs the bench on dbURL and prints its results to e.stdout.
// ready, when not nil, is called once the throwaway queue exists (tests
// cancel ctx there to check the cleanup).
func runBench(ctx context.Context, dbURL string, o benchOptions, e env, ready func(schema string)) (err error) {
	if o.jobs < 1 || o.latencyJobs < 1 || o.concurrency < 1 {
		return errors.New("--jobs, --latency-jobs and --concurrency must be at least 1")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("--database-url: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "skipjack bench"
	// A handler slot each, and a few for enqueueing and the bench itself.
	cfg.MaxConns = int32(o.concurrency) + 5
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return err
	}

	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := benchqueue.GeneratedSchema + "_" + hex.EncodeToString(b[:])
	fmt.Fprintf(e.stdout, "skipjack bench: throwaway queue %s.probe (dropped at the end)\n", schema)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
		defer cancel()
		if _, derr := pool.Exec(cctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); derr != nil {
			err = errors.Join(err, fmt.Errorf("drop the throwaway schema %s (drop it by hand): %w", schema, derr))
			return
		}
		fmt.Fprintf(e.stdout, "dropped schema %s\n", schema)
	}()
	if _, err := pool.Exec(ctx, benchqueue.DDL(schema)); err != nil {
		return fmt.Errorf("create the throwaway queue: %w", err)
	}
	if ready != nil {
		ready(schema)
	}
	res, err := measure(ctx, pool, probe.Open(schema), o, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "enqueue:   %d jobs with EnqueueMany (COPY, 5000 a call): %.0f jobs/s\n", o.jobs, res.enqueueRate)
	fmt.Fprintf(e.stdout, "burn-down: %d jobs in %v: %.0f jobs/s (Concurrency %d, no-op handler)\n", o.jobs, res.burn.Round(time.Millisecond), res.burnRate, o.concurrency)
	fmt.Fprintf(e.stdout, "latency:   %d jobs enqueued one at a time: pickup p50 %v, p99 %v, max %v\n", o.latencyJobs, ms(res.p50), ms(res.p99), ms(res.max))
	return nil
}

// ms rounds d for printing.
func ms(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

// measure runs the burn-down, then the latency run, with one worker.
func measure(ctx context.Context, pool *pgxpool.Pool, q benchQueue, o benchOptions, e env) (benchResult, error) {
	var res benchResult
	// The burn-down's backlog, enqueued before the worker starts.
	const batch = 5000
	start := time.Now()
	for i := 0; i < o.jobs; i += batch {
		ps := make([]probe.Payload, min(batch, o.jobs-i))
		if _, err := q.EnqueueMany(ctx, pool, ps); err != nil {
			return res, fmt.Errorf("enqueue the burn-down: %w", err)
		}
	}
	res.enqueueRate = float64(o.jobs) / time.Since(start).Seconds()

	// base is the clock a latency job's payload carries: nanoseconds
	// since it, monotonic within this process.
	base := time.Now()
	var handled atomic.Int64
	pickedUp := make(chan time.Duration, 1)
	w := q.NewWorker(pool, func(_ context.Context, job *probe.Job) error {
		if job.Payload.Sent > 0 {
			select { // a job run twice (at least once) is not waited for
			case pickedUp <- time.Since(base) - time.Duration(job.Payload.Sent):
			default:
			}
		}
		handled.Add(1)
		return nil
	}, skipjack.WorkerConfig{
		Concurrency: o.concurrency,
		Logger:      slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = w.Run(wctx) })
	stopWorker := func() error {
		cancel()
		wg.Wait()
		return runErr
	}
	fail := func(err error) (benchResult, error) {
		return res, errors.Join(err, stopWorker())
	}

	start = time.Now()
	for {
		s, err := q.Stats(ctx, pool)
		if err != nil {
			return fail(fmt.Errorf("burn-down: %w", err))
		}
		if handled.Load() >= int64(o.jobs) && s.Pending+s.Scheduled+s.Running == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	res.burn = time.Since(start)
	res.burnRate = float64(o.jobs) / res.burn.Seconds()

	lat := make([]time.Duration, 0, o.latencyJobs)
	for range o.latencyJobs {
		if _, err := q.Enqueue(ctx, pool, probe.Payload{Sent: max(1, int64(time.Since(base)))}); err != nil {
			return fail(fmt.Errorf("latency run: %w", err))
		}
		select {
		case d := <-pickedUp:
			lat = append(lat, d)
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	if err := stopWorker(); err != nil {
		return res, fmt.Errorf("worker: %w", err)
	}
	slices.Sort(lat)
	res.p50 = lat[len(lat)/2]
	res.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	res.max = lat[len(lat)-1]
	return res, nil
}

// benchQueue is the probe queue's API the bench uses.
type benchQueue interface {
	EnqueueMany(ctx context.Context, db skipjack.DBTX, ps []probe.Payload, opts ...skipjack.EnqueueOption) (int64, error)
	Enqueue(ctx context.Context, db skipjack.DBTX, p probe.Payload, opts ...skipjack.EnqueueOption) (int64, error)
	Stats(ctx context.Context, db skipjack.DBTX) (skipjack.Stats, error)
	NewWorker(pool *pgxpool.Pool, handle func(ctx context.Context, job *probe.Job) error, cfg skipjack.WorkerConfig) *skipjack.Worker[probe.Payload]
}
