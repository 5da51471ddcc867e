package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is the no-op job as River sees it.
type riverArgs struct {
	N     int64  `json:"n"`
	Label string `json:"label"`
}

// Kind implements river.JobArgs.
func (riverArgs) Kind() string { return "noop" }

// riverSystem returns River with the configuration River's own `river bench`
// uses (tuned) or with River's defaults. Both run on pgxpool's default pool
// size, as River's CLI opens it.
func riverSystem(tuned bool, logger *slog.Logger) system {
	name := "river-default"
	if tuned {
		name = "river-tuned"
	}
	return system{
		name:      name,
		retention: "keeps completed 24h (River default)",
		migrate:   migrateRiver,
		open: func(pool *pgxpool.Pool) (queue, error) {
			return newRiverQueue(pool, tuned, 0, logger)
		},
	}
}

// riverWorkersSystem returns River with its defaults and maxWorkers workers
// on its one queue (the heap experiment).
func riverWorkersSystem(maxWorkers int, logger *slog.Logger) system {
	return system{
		name:      fmt.Sprintf("river-w%d", maxWorkers),
		retention: fmt.Sprintf("River defaults, MaxWorkers %d", maxWorkers),
		migrate:   migrateRiver,
		open: func(pool *pgxpool.Pool) (queue, error) {
			return newRiverQueue(pool, false, maxWorkers, logger)
		},
	}
}

func migrateRiver(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

// riverQueue is River bound to one pool: one client both inserts and works.
type riverQueue struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	handle atomic.Pointer[func(int64)]
}

// newRiverQueue configures River as River's own bench does (tuned) or with
// its defaults; maxWorkers > 0 overrides the queue's MaxWorkers.
func newRiverQueue(pool *pgxpool.Pool, tuned bool, maxWorkers int, logger *slog.Logger) (*riverQueue, error) {
	q := &riverQueue{pool: pool}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[riverArgs]) error {
		if h := q.handle.Load(); h != nil {
			(*h)(job.Args.N)
		}
		return nil
	}))
	cfg := &river.Config{
		Logger:  logger,
		Workers: workers,
		// River has no default worker count; 100 is what its documentation
		// and examples configure.
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
	}
	if tuned {
		// The values of River's own benchmark command (cmd/river bench).
		cfg.FetchCooldown = 2 * time.Millisecond
		cfg.FetchPollInterval = 20 * time.Millisecond
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2000}}
	}
	if maxWorkers > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	q.client = client
	return q, nil
}

func (q *riverQueue) enqueueMany(ctx context.Context, ps []payload) error {
	params := make([]river.InsertManyParams, len(ps))
	for i, p := range ps {
		params[i] = river.InsertManyParams{Args: riverArgs(p)}
	}
	if _, err := q.client.InsertManyFast(ctx, params); err != nil {
		return fmt.Errorf("river insert many fast: %w", err)
	}
	return nil
}

func (q *riverQueue) enqueue(ctx context.Context, p payload) error {
	if _, err := q.client.Insert(ctx, riverArgs(p), nil); err != nil {
		return fmt.Errorf("river insert: %w", err)
	}
	return nil
}

func (q *riverQueue) work(ctx context.Context, handle func(int64)) error {
	q.handle.Store(&handle)
	if err := q.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("river start: %w", err)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := q.client.Stop(stopCtx); err != nil {
		return fmt.Errorf("river stop: %w", err)
	}
	return nil
}

func (q *riverQueue) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
		WHERE state IN ('available', 'pending', 'running', 'retryable', 'scheduled')`).Scan(&n)
	return n, err
}

func (q *riverQueue) fillFinished(ctx context.Context, n int) error {
	// Completed rows as River's completer leaves them (what its default
	// 24h CompletedJobRetentionPeriod keeps).
	if _, err := q.pool.Exec(ctx, `INSERT INTO river_job
		(state, args, kind, queue, priority, max_attempts, attempt, attempted_at, attempted_by, finalized_at, created_at, scheduled_at)
		SELECT 'completed', '{"n": 0, "label": "bench"}', 'noop', 'default', 1, 25, 1,
		       now(), ARRAY['bench'], now(), now(), now()
		FROM generate_series(1, $1)`, n); err != nil {
		return fmt.Errorf("insert completed rows: %w", err)
	}
	if _, err := q.pool.Exec(ctx, "VACUUM ANALYZE river_job"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// pending counts jobs not yet fetched by a producer.
func (q *riverQueue) pending(ctx context.Context) (int64, error) {
	var n int64
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available'`).Scan(&n)
	return n, err
}

// runRiverIdle runs one River client with River's defaults and n queues of
// MaxWorkers 100 on pool until ctx ends.
func runRiverIdle(ctx context.Context, pool *pgxpool.Pool, n int, logger *slog.Logger) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[riverArgs]) error { return nil }))
	queues := make(map[string]river.QueueConfig, n)
	for i := range n {
		queues[fmt.Sprintf("idle_%02d", i)] = river.QueueConfig{MaxWorkers: 100}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger, Workers: workers, Queues: queues})
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
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
}

func (q *riverQueue) claimStats() (int64, time.Duration, bool) { return 0, 0, false }
