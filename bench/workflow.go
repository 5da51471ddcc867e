package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/bench/internal/jobs"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/chain3"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/fan10"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/noop"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/wfstep"
)

// workflowShape is one line of the workflow experiment: how its work is
// queued before the clock starts, and how many handled jobs end it.
type workflowShape struct {
	name, what string
	// queue inserts about n jobs' worth of work and returns how many jobs
	// (steps) it queued.
	queue func(ctx context.Context, pool *pgxpool.Pool, n int) (int, error)
	// workflowSchema is false for the control whose schema has the
	// workflow objects dropped before anything is queued.
	workflowSchema bool
}

// workflowStarters is how many goroutines start workflows at once.
const workflowStarters = 8

// workflowShapes are the workflow experiment's lines, in the order of the
// first run.
var workflowShapes = []workflowShape{
	{name: "plain", what: "plain jobs (noop, one COPY)", queue: queuePlain, workflowSchema: true},
	{name: "plain, no workflow objects", what: "the same, the schema's workflow tables, functions and triggers dropped", queue: queuePlain},
	{name: "chain3", what: "3-step chains a -> b -> c (wf_step)", queue: func(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
		return startWorkflows(ctx, pool, n/3, 3, func(ctx context.Context) error {
			_, err := chain3.Start(ctx, pool, chain3.Steps{})
			return err
		})
	}, workflowSchema: true},
	{name: "fan10", what: "fan-out/fan-in root -> 10 -> sink (wf_step)", queue: func(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
		return startWorkflows(ctx, pool, n/12, 12, func(ctx context.Context) error {
			_, err := fan10.Start(ctx, pool, fan10.Steps{})
			return err
		})
	}, workflowSchema: true},
}

// queuePlain enqueues n noop jobs with one COPY.
func queuePlain(ctx context.Context, pool *pgxpool.Pool, n int) (int, error) {
	ps := make([]noop.Payload, n)
	for i := range ps {
		ps[i] = noop.Payload{N: int64(i)}
	}
	_, err := noop.EnqueueMany(ctx, pool, ps)
	return n, err
}

// startWorkflows starts count workflows of size steps from
// workflowStarters goroutines and returns how many steps they hold.
func startWorkflows(ctx context.Context, pool *pgxpool.Pool, count, size int, start func(context.Context) error) (int, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workflowStarters)
	for range workflowStarters {
		wg.Go(func() {
			for next.Add(1) <= int64(count) {
				if err := start(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return count * size, nil
}

// dropWorkflowObjects drops what the workflow migration created, for the
// control line: wf_step's triggers, the functions and the tables.
const dropWorkflowObjects = `DROP TRIGGER "_skipjack_workflow_hold" ON "skipjack"."wf_step";
DROP TRIGGER "_skipjack_workflow_ack" ON "skipjack"."wf_step";
DROP TRIGGER "_skipjack_workflow_step" ON "skipjack"."wf_step";
DROP FUNCTION "skipjack"."_skipjack_workflow_hold"();
DROP FUNCTION "skipjack"."_skipjack_workflow_step"();
DROP TABLE "skipjack"."_skipjack_workflow_steps";
DROP TABLE "skipjack"."_skipjack_workflows";`

// workflowThroughput burns down -workflows jobs' worth of work queued as
// each workflowShape, shapes interleaved within each of -runs runs (their
// order rotating), each in a fresh database with one worker per queue
// (WorkerConfig{}, the -skipjack-conns pool) whose handlers return at once;
// the clock runs from the workers' start to the last job handled.
func (b *bench) workflowThroughput(ctx context.Context) error {
	s, ok := systemByName(b.o, "skipjack-default")
	if !ok {
		return fmt.Errorf("system skipjack-default is not in this build")
	}
	fmt.Fprintf(b.out, "\nWorkflows: burn-down of %d jobs' worth of work as plain jobs and as workflow steps, one process, WorkerConfig{} on a %d-connection pool, handlers that return at once; shapes interleaved, order rotating, %d run(s)\n\n",
		b.o.workflows, b.o.skipjackConns, b.o.runs)
	rates := make(map[string][]float64)
	for r := range b.o.runs {
		for i := range workflowShapes {
			sh := workflowShapes[(i+r)%len(workflowShapes)]
			err := b.withDB(ctx, s, "workflows", func(dsn string) error {
				rate, err := b.workflowRun(ctx, dsn, sh)
				if err != nil {
					return err
				}
				rates[sh.name] = append(rates[sh.name], rate)
				fmt.Fprintf(b.out, "run %d  %-28s %8.0f jobs/s\n", r+1, sh.name, rate)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: %w", sh.name, err)
			}
		}
	}
	plain := median(rates["plain"])
	fmt.Fprintf(b.out, "\n| shape | what | median jobs (steps)/s | vs plain | runs |\n|---|---|--:|--:|---|\n")
	for _, sh := range workflowShapes {
		m := median(rates[sh.name])
		fmt.Fprintf(b.out, "| %s | %s | %.0f | %.2f | %s |\n", sh.name, sh.what, m, m/plain, formatRates(rates[sh.name]))
	}
	return nil
}

// formatRates lists a shape's rates in run order.
func formatRates(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.0f", x)
	}
	return out
}

// workflowRun queues one shape's work in the database at dsn, then runs
// the noop and wf_step workers until every job is handled, and returns
// jobs handled per second.
func (b *bench) workflowRun(ctx context.Context, dsn string, sh workflowShape) (float64, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = b.o.skipjackConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	if err := jobs.Migrate(ctx, pool); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if !sh.workflowSchema {
		if _, err := pool.Exec(ctx, dropWorkflowObjects); err != nil {
			return 0, fmt.Errorf("drop workflow objects: %w", err)
		}
	}
	n, err := sh.queue(ctx, pool, b.o.workflows)
	if err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	var handled atomic.Int64
	done := make(chan struct{})
	count := func() {
		if handled.Add(1) == int64(n) {
			close(done)
		}
	}
	wcfg := skipjack.WorkerConfig{Logger: b.o.logger()}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	start := time.Now()
	wg.Go(func() {
		errs <- noop.NewWorker(pool, func(context.Context, *noop.Job) error { count(); return nil }, wcfg).Run(runCtx)
	})
	wg.Go(func() {
		errs <- wfstep.NewWorker(pool, func(context.Context, *wfstep.Job) error { count(); return nil }, wcfg).Run(runCtx)
	})
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		stop()
		wg.Wait()
		return 0, fmt.Errorf("%d of %d jobs handled after 10 minutes", handled.Load(), n)
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(n) / elapsed.Seconds(), nil
}
