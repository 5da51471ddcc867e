package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/bench/internal/jobs/capped"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/kept"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/noop"
)

// The scenario systems: the configurations the adversity runner compares.
const (
	scenSkipjackDefault = "skipjack-default" // WorkerConfig{}
	scenSkipjackTuned   = "skipjack-tuned"   // Concurrency = the pool size
	scenRiverTuned      = "river-tuned"      // River's bench settings, rescue after 30s
)

// scenarioSystems lists them in table order.
var scenarioSystems = []string{scenSkipjackDefault, scenSkipjackTuned, scenRiverTuned}

// workerAppName marks the worker processes' connections in
// pg_stat_activity, for the backend-kill phase.
const workerAppName = "adversity-worker"

// riverMixedQueues are River's queues in the mixed-queue phase; skipjack's
// are its generated noop, kept and capped queues.
var riverMixedQueues = []string{river.QueueDefault, "mixed_2", "mixed_3"}

// effectsTable records every job a handler ran, written in the handler's
// transaction together with the job's acknowledgement (CompleteTx), so
// that a job counted twice there ran to completion twice.
const effectsTable = "adversity_effects"

// runScenarioWorker is the worker process of the scenario runner
// (`bench scenario-worker`): it runs one system's workers on every queue
// of the scenarios and writes a line per completed job to stdout,
// "c <seq> <handler start, Unix ns>", and "e <seq>" per handler error. It
// stops cleanly when its stdin closes.
func runScenarioWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scenario-worker", flag.ContinueOnError)
	sys := fs.String("system", "", "system: "+fmt.Sprint(scenarioSystems))
	dsn := fs.String("dsn", "", "database URL")
	conns := fs.Int("conns", 30, "pool size")
	verbose := fs.Bool("v", false, "log warnings")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The phases provoke database errors on purpose (killed backends, a
	// restart), which the systems log; the runner's own accounting is
	// what judges them, so the logs are shown only with -v.
	level := slog.Level(100)
	if *verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return fmt.Errorf("parse pool config: %w", err)
	}
	cfg.MaxConns = int32(*conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = workerAppName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open pool: %w", err)
	}
	defer pool.Close()

	rep := newReporter(os.Stdout)
	defer rep.close()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		// The driver closes stdin to stop the workers cleanly.
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var run func(context.Context) error
	switch *sys {
	case scenSkipjackDefault, scenSkipjackTuned:
		run = skipjackScenarioWorkers(pool, *sys, *conns, logger, rep)
	case scenRiverTuned:
		run, err = riverScenarioWorkers(pool, *conns, logger, rep)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown scenario system %q", *sys)
	}
	rep.line("ready")
	err = run(wctx)
	rep.line("stopped")
	return err
}

// skipjackScenarioWorkers returns a function that runs one worker per
// scenario queue (noop, kept, capped) until its context ends.
func skipjackScenarioWorkers(pool *pgxpool.Pool, sys string, conns int, logger *slog.Logger, rep *reporter) func(context.Context) error {
	cfg := skipjack.WorkerConfig{Logger: logger}
	if sys == scenSkipjackTuned {
		// One handler per pool connection: a handler holding a claimed
		// job never waits for a connection for its transaction.
		cfg.Concurrency = conns
		cfg.BatchSize = conns
	}
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		errs := make([]error, 3)
		wg.Go(func() {
			errs[0] = noop.NewWorker(pool, func(ctx context.Context, job *noop.Job) error {
				return runEffect(ctx, pool, job.Payload.N, rep, func(tx pgx.Tx) error { return noop.CompleteTx(ctx, tx, job) })
			}, cfg).Run(ctx)
		})
		wg.Go(func() {
			errs[1] = kept.NewWorker(pool, func(ctx context.Context, job *kept.Job) error {
				return runEffect(ctx, pool, job.Payload.N, rep, func(tx pgx.Tx) error { return kept.CompleteTx(ctx, tx, job) })
			}, cfg).Run(ctx)
		})
		wg.Go(func() {
			errs[2] = capped.NewWorker(pool, func(ctx context.Context, job *capped.Job) error {
				return runEffect(ctx, pool, job.Payload.N, rep, func(tx pgx.Tx) error { return capped.CompleteTx(ctx, tx, job) })
			}, cfg).Run(ctx)
		})
		wg.Wait()
		return errors.Join(errs...)
	}
}

// riverScenarioWorkers returns a function that runs one River client with
// the scenario's queues until its context ends.
func riverScenarioWorkers(pool *pgxpool.Pool, conns int, logger *slog.Logger, rep *reporter) (func(context.Context) error, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[riverArgs]) error {
		return runEffect(ctx, pool, job.Args.N, rep, func(tx pgx.Tx) error {
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		})
	}))
	queues := map[string]river.QueueConfig{}
	for _, q := range riverMixedQueues {
		queues[q] = river.QueueConfig{MaxWorkers: 100}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  logger,
		Workers: workers,
		Queues:  queues,
		// River's own bench settings.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		// River rescues a job whose worker died only after
		// RescueStuckJobsAfter (default 1h); at 30s it matches
		// skipjack's 30s lease, so the kill-worker phase compares like
		// with like. JobTimeout must stay below it.
		JobTimeout:           20 * time.Second,
		RescueStuckJobsAfter: 30 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return func(ctx context.Context) error {
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return fmt.Errorf("river start: %w", err)
		}
		<-ctx.Done()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := client.Stop(stopCtx); err != nil {
			return fmt.Errorf("river stop: %w", err)
		}
		return nil
	}, nil
}

// runEffect is every scenario handler: in one transaction it records the
// job's effect and acknowledges the job (complete), then reports it.
func runEffect(ctx context.Context, pool *pgxpool.Pool, seq int64, rep *reporter, complete func(pgx.Tx) error) (err error) {
	start := time.Now().UnixNano()
	defer func() {
		if err != nil {
			rep.line("e " + strconv.FormatInt(seq, 10))
		}
	}()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `INSERT INTO `+effectsTable+` (seq) VALUES ($1)`, seq); err != nil {
		return fmt.Errorf("record effect: %w", err)
	}
	if err := complete(tx); err != nil {
		return fmt.Errorf("complete in tx: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	rep.line("c " + strconv.FormatInt(seq, 10) + " " + strconv.FormatInt(start, 10))
	return nil
}

// reporter writes the worker process's lines to its stdout, flushed every
// 20ms: a SIGKILL loses at most the last few.
type reporter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	done chan struct{}
	wg   sync.WaitGroup
}

func newReporter(w io.Writer) *reporter {
	r := &reporter{w: bufio.NewWriterSize(w, 64<<10), done: make(chan struct{})}
	r.wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-t.C:
				r.mu.Lock()
				_ = r.w.Flush()
				r.mu.Unlock()
			}
		}
	})
	return r
}

func (r *reporter) line(s string) {
	r.mu.Lock()
	_, _ = r.w.WriteString(s)
	_ = r.w.WriteByte('\n')
	r.mu.Unlock()
}

func (r *reporter) close() {
	close(r.done)
	r.wg.Wait()
	r.mu.Lock()
	_ = r.w.Flush()
	r.mu.Unlock()
}
