package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/bench/internal/jobs"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/capped"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/kept"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/keyed"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/noop"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/paced"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/perkey"
	"github.com/skipjack-dev/skipjack/bench/internal/jobs/quiet"
)

func init() {
	skipjackSystems = skipjackSystemsAvailable
	skipjackIdleWorkers = runSkipjackIdle
	skipjackMigrate = jobs.Migrate
	skipjackInserters = func(pool *pgxpool.Pool) []inserter {
		ps := func(ps []payload) []noop.Payload {
			return convert(ps, func(p payload) noop.Payload { return noop.Payload(p) })
		}
		return []inserter{
			{"skipjack EnqueueMany (COPY)", func(ctx context.Context, p []payload) error {
				_, err := noop.EnqueueMany(ctx, pool, ps(p))
				return err
			}},
			{"skipjack EnqueueAll", func(ctx context.Context, p []payload) error {
				_, err := noop.EnqueueAll(ctx, pool, ps(p))
				return err
			}},
		}
	}
	skipjackHeapSystem = func(o options, logger *slog.Logger) system {
		return skipjackSystem(fmt.Sprintf("skipjack-c%d", o.heap), fmt.Sprintf("queue noop, WorkerConfig{Concurrency: %d}", o.heap),
			queueNoop, skipjack.WorkerConfig{Concurrency: o.heap}, o.skipjackConns, logger)
	}
}

// runSkipjackIdle runs n workers with the default WorkerConfig on pool,
// alternating between the noop and kept queues, until ctx ends; the bench
// has no more queues, and its generated packages are bound to their tables.
func runSkipjackIdle(ctx context.Context, pool *pgxpool.Pool, n int, logger *slog.Logger) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		cfg := skipjack.WorkerConfig{Logger: logger}
		wg.Go(func() {
			if i%2 == 0 {
				errs[i] = noop.NewWorker(pool, func(context.Context, *noop.Job) error { return nil }, cfg).Run(ctx)
			} else {
				errs[i] = kept.NewWorker(pool, func(context.Context, *kept.Job) error { return nil }, cfg).Run(ctx)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("idle workers: %w", err)
	}
	return nil
}

// skipjackSystemsAvailable returns the skipjack rows: the noop queue (delete
// at ack) with the default and the tuned WorkerConfig, the kept queue
// (retention.completed 24h) with the tuned config, and, for the notify
// experiment only, the quiet queue (notify: false) with the default config.
func skipjackSystemsAvailable(o options, logger *slog.Logger) []system {
	tuned := skipjack.WorkerConfig{Concurrency: o.tunedConcurrency, BatchSize: o.tunedBatch}
	poll := skipjackSystem("skipjack-poll", "deletes at ack (default), notify: false", queueQuiet, skipjack.WorkerConfig{}, o.skipjackConns, logger)
	poll.experimentOnly = true
	// The flow-control rows, each with WorkerConfig{} and the tuned config
	// (-tuned suffix), to compare with skipjack-default and skipjack-tuned
	// (issue 43: limits that never bind should cost little).
	var flow []system
	for _, f := range []struct{ name, retention, kind string }{
		{"skipjack-capped", "limits.concurrency: 100000 (never binds)", queueCapped},
		{"skipjack-paced", "limits.rate: 10M per 1s (never binds)", queuePaced},
		{"skipjack-perkey", "limits.per_key: {by: [n], concurrency: 1} (one key per job, never binds)", queuePerKey},
		{"skipjack-serial", "serial.by: [n] (one key per job)", queueKeyed},
	} {
		flow = append(flow,
			skipjackSystem(f.name, f.retention, f.kind, skipjack.WorkerConfig{}, o.skipjackConns, logger),
			skipjackSystem(f.name+"-tuned", f.retention, f.kind, tuned, o.skipjackConns, logger))
	}
	for i := range flow {
		flow[i].experimentOnly = true // -systems skipjack-default,skipjack-capped,...
	}
	return append([]system{
		skipjackSystem("skipjack-default", "deletes at ack (default)", queueNoop, skipjack.WorkerConfig{}, o.skipjackConns, logger),
		skipjackSystem("skipjack-tuned", "deletes at ack (default)", queueNoop, tuned, o.skipjackConns, logger),
		skipjackSystem("skipjack-kept", "keeps completed 24h (retention.completed)", queueKept, tuned, o.skipjackConns, logger),
		poll,
	}, flow...)
}

// The generated queues of bench/skipjack.yaml.
const (
	queueNoop  = "noop"  // deletes completed jobs at ack
	queueKept  = "kept"  // keeps completed jobs 24h
	queueQuiet = "quiet" // like noop, with notify: false
	// The flow-control queues, like noop with limits that never bind.
	queueCapped = "capped" // limits.concurrency
	queuePaced  = "paced"  // limits.rate
	queueKeyed  = "keyed"  // serial.by
	queuePerKey = "perkey" // limits.per_key
)

func skipjackSystem(name, retention, kind string, cfg skipjack.WorkerConfig, conns int32, logger *slog.Logger) system {
	return system{
		name:      name,
		retention: retention,
		maxConns:  conns,
		migrate:   jobs.Migrate,
		open: func(pool *pgxpool.Pool) (queue, error) {
			return &skipjackQueue{pool: pool, kind: kind, cfg: cfg, logger: logger}, nil
		},
	}
}

// skipjackQueue runs one of the generated queue packages.
type skipjackQueue struct {
	pool   *pgxpool.Pool
	kind   string // queueNoop, queueKept or queueQuiet
	cfg    skipjack.WorkerConfig
	logger *slog.Logger

	claims    atomic.Int64
	claimTook atomic.Int64 // nanoseconds
	// From ClaimDone: every claim statement, the jobs they were allowed
	// to take and the jobs they took (the -procs experiment's claim
	// columns).
	claimCalls, claimAsked, claimGot atomic.Int64
}

func (q *skipjackQueue) table() string {
	return `"skipjack".` + `"` + q.kind + `"`
}

func (q *skipjackQueue) enqueueMany(ctx context.Context, ps []payload) error {
	var err error
	switch q.kind {
	case queueKept:
		_, err = kept.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) kept.Payload { return kept.Payload(p) }))
	case queueQuiet:
		_, err = quiet.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) quiet.Payload { return quiet.Payload(p) }))
	case queueCapped:
		_, err = capped.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) capped.Payload { return capped.Payload(p) }))
	case queuePaced:
		_, err = paced.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) paced.Payload { return paced.Payload(p) }))
	case queueKeyed:
		_, err = keyed.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) keyed.Payload { return keyed.Payload(p) }))
	case queuePerKey:
		_, err = perkey.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) perkey.Payload { return perkey.Payload(p) }))
	default:
		_, err = noop.EnqueueMany(ctx, q.pool, convert(ps, func(p payload) noop.Payload { return noop.Payload(p) }))
	}
	return err
}

func convert[T any](ps []payload, f func(payload) T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[i] = f(p)
	}
	return out
}

func (q *skipjackQueue) enqueue(ctx context.Context, p payload) error {
	var err error
	switch q.kind {
	case queueKept:
		_, err = kept.Enqueue(ctx, q.pool, kept.Payload(p))
	case queueQuiet:
		_, err = quiet.Enqueue(ctx, q.pool, quiet.Payload(p))
	case queueCapped:
		_, err = capped.Enqueue(ctx, q.pool, capped.Payload(p))
	case queuePaced:
		_, err = paced.Enqueue(ctx, q.pool, paced.Payload(p))
	case queueKeyed:
		_, err = keyed.Enqueue(ctx, q.pool, keyed.Payload(p))
	case queuePerKey:
		_, err = perkey.Enqueue(ctx, q.pool, perkey.Payload(p))
	default:
		_, err = noop.Enqueue(ctx, q.pool, noop.Payload(p))
	}
	return err
}

func (q *skipjackQueue) work(ctx context.Context, handle func(int64)) error {
	cfg := q.cfg
	cfg.Logger = q.logger
	cfg.Hooks = claimHooks{q}
	switch q.kind {
	case queueKept:
		return kept.NewWorker(q.pool, func(_ context.Context, job *kept.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	case queueQuiet:
		return quiet.NewWorker(q.pool, func(_ context.Context, job *quiet.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	case queueCapped:
		return capped.NewWorker(q.pool, func(_ context.Context, job *capped.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	case queuePaced:
		return paced.NewWorker(q.pool, func(_ context.Context, job *paced.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	case queueKeyed:
		return keyed.NewWorker(q.pool, func(_ context.Context, job *keyed.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	case queuePerKey:
		return perkey.NewWorker(q.pool, func(_ context.Context, job *perkey.Job) error {
			handle(job.Payload.N)
			return nil
		}, cfg).Run(ctx)
	}
	return noop.NewWorker(q.pool, func(_ context.Context, job *noop.Job) error {
		handle(job.Payload.N)
		return nil
	}, cfg).Run(ctx)
}

func (q *skipjackQueue) unfinished(ctx context.Context) (int64, error) {
	var n int64
	// Two counts that the claim and lease partial indexes answer (a claimed
	// row always has a lease), not one over "state" IN (...): the table has
	// no index on "state", so with a million finished rows kept that was a
	// ~90 ms sequential scan, polled at the end of every burn-down, which
	// charged the bench's own finish detection to the queue.
	err := q.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+q.table()+` WHERE "state" = 'pending')
		+ (SELECT count(*) FROM `+q.table()+` WHERE "lease_expires_at" IS NOT NULL AND "state" = 'running')`).Scan(&n)
	return n, err
}

func (q *skipjackQueue) fillFinished(ctx context.Context, n int) error {
	// The noop queue deletes completed jobs at ack, so what it keeps are
	// failed jobs (retention.failed, 720h by default) with an error history;
	// the kept queue keeps completed jobs.
	sql := `INSERT INTO ` + q.table() + ` ("state", "payload", "attempt", "max_attempts", "finished_at", "worker", "errors")
		SELECT 'failed', '{"n": 0, "label": "bench"}', 25, 25, now(), 'bench',
		       '[{"attempt": 25, "at": "2026-01-01T00:00:00Z", "error": "boom", "worker": "bench"}]'
		FROM generate_series(1, $1)`
	if q.kind == queueKept {
		sql = `INSERT INTO "skipjack"."kept" ("state", "payload", "attempt", "finished_at", "worker")
		SELECT 'completed', '{"n": 0, "label": "bench"}', 1, now(), 'bench'
		FROM generate_series(1, $1)`
	}
	if _, err := q.pool.Exec(ctx, sql, n); err != nil {
		return fmt.Errorf("insert finished rows: %w", err)
	}
	if _, err := q.pool.Exec(ctx, "VACUUM ANALYZE "+q.table()); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// pending counts jobs not yet claimed.
func (q *skipjackQueue) pending(ctx context.Context) (int64, error) {
	var n int64
	err := q.pool.QueryRow(ctx, `SELECT count(*) FROM `+q.table()+` WHERE "state" = 'pending'`).Scan(&n)
	return n, err
}

func (q *skipjackQueue) claimStats() (int64, time.Duration, bool) {
	return q.claims.Load(), time.Duration(q.claimTook.Load()), true
}

// claimHooks counts claim statements and their time.
type claimHooks struct{ q *skipjackQueue }

func (h claimHooks) JobDone(string, int64, int, time.Duration, error) {}

// ClaimDone implements skipjack.ClaimHook.
func (h claimHooks) ClaimDone(c skipjack.ClaimInfo) {
	h.q.claimCalls.Add(1)
	h.q.claimAsked.Add(int64(c.Limit))
	h.q.claimGot.Add(int64(c.Jobs))
}

func (h claimHooks) Claimed(_ string, _ int, took time.Duration) {
	h.q.claims.Add(1)
	h.q.claimTook.Add(int64(took))
}
