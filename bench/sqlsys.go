package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sqlDesign is a queue written directly in SQL: the seed articles' plain
// design and the raw floor are two configurations of it.
type sqlDesign struct {
	table     string
	ddl       string
	claim     string        // returns id, payload; $1 is the claim size
	claimSize int           // jobs per claim statement
	workers   int           // claiming goroutines
	idle      time.Duration // sleep when a claim finds nothing
	ackEach   string        // one statement per job ($1 = id), or ""
	ackBatch  string        // one statement per claimed batch ($1 = ids), or ""
	remaining string        // counts unfinished jobs
	fill      string        // inserts $1 finished rows
}

// plainSystem is the design of the seed articles: a single tasks table with
// a partial index on pending tasks, ten goroutines each claiming 10 tasks per
// `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED)` statement,
// sleeping 500ms when the queue is empty, and one UPDATE per task marking it
// done.
func plainSystem() system {
	d := &sqlDesign{
		table: "tasks",
		ddl: `CREATE TABLE tasks (
    id          BIGSERIAL PRIMARY KEY,
    queue       TEXT NOT NULL DEFAULT 'default',
    payload     JSONB NOT NULL,
    status      SMALLINT NOT NULL DEFAULT 0,
    run_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts    INT NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_tasks_poll ON tasks (queue, status, run_at) WHERE status = 0;`,
		claim: `UPDATE tasks SET status = 1, attempts = attempts + 1
WHERE id IN (
    SELECT id FROM tasks
    WHERE queue = 'default' AND status = 0 AND run_at <= now()
    ORDER BY run_at
    FOR UPDATE SKIP LOCKED
    LIMIT $1
)
RETURNING id, payload`,
		claimSize: 10,
		workers:   10,
		idle:      500 * time.Millisecond,
		ackEach:   `UPDATE tasks SET status = 2 WHERE id = $1`,
		remaining: `SELECT count(*) FROM tasks WHERE status IN (0, 1)`,
		fill: `INSERT INTO tasks (payload, status, attempts)
SELECT '{"n": 0, "label": "bench"}', 2, 1 FROM generate_series(1, $1)`,
	}
	return system{
		name:      "plain",
		retention: "keeps done rows (status=2)",
		maxConns:  int32(d.workers) + 2,
		migrate:   d.migrate,
		open:      d.open,
	}
}

// floorSystem is the raw SQL floor: four goroutines each claiming 1000 jobs
// per statement with SKIP LOCKED and deleting each claimed batch with one
// DELETE. It has no leases, retries or wake-ups (it polls every 5ms when
// idle): it shows what Postgres itself allows on this machine.
func floorSystem() system {
	d := &sqlDesign{
		table: "floor_jobs",
		ddl: `CREATE TABLE floor_jobs (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state   smallint NOT NULL DEFAULT 0,
    payload jsonb NOT NULL
);
CREATE INDEX floor_jobs_pending ON floor_jobs (id) WHERE state = 0;`,
		claim: `UPDATE floor_jobs SET state = 1
WHERE id IN (
    SELECT id FROM floor_jobs WHERE state = 0
    ORDER BY id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
RETURNING id, payload`,
		claimSize: 1000,
		workers:   4,
		idle:      5 * time.Millisecond,
		ackBatch:  `DELETE FROM floor_jobs WHERE id = ANY($1)`,
		remaining: `SELECT count(*) FROM floor_jobs WHERE state IN (0, 1)`,
		fill: `INSERT INTO floor_jobs (payload, state)
SELECT '{"n": 0, "label": "bench"}', 2 FROM generate_series(1, $1)`,
	}
	return system{
		name:      "floor",
		retention: "deletes at ack (batch DELETE)",
		maxConns:  int32(d.workers) + 2,
		migrate:   d.migrate,
		open:      d.open,
	}
}

func (d *sqlDesign) migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, d.ddl); err != nil {
		return fmt.Errorf("create %s: %w", d.table, err)
	}
	return nil
}

func (d *sqlDesign) open(pool *pgxpool.Pool) (queue, error) {
	return &sqlQueue{d: d, pool: pool}, nil
}

// sqlQueue is a sqlDesign bound to one pool.
type sqlQueue struct {
	d    *sqlDesign
	pool *pgxpool.Pool
}

func (q *sqlQueue) enqueueMany(ctx context.Context, ps []payload) error {
	rows := make([][]any, len(ps))
	for i, p := range ps {
		b, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode payload: %w", err)
		}
		rows[i] = []any{b}
	}
	if _, err := q.pool.CopyFrom(ctx, pgx.Identifier{q.d.table}, []string{"payload"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy into %s: %w", q.d.table, err)
	}
	return nil
}

func (q *sqlQueue) enqueue(ctx context.Context, p payload) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode payload: %w", err)
	}
	if _, err := q.pool.Exec(ctx, "INSERT INTO "+q.d.table+" (payload) VALUES ($1)", b); err != nil {
		return fmt.Errorf("insert into %s: %w", q.d.table, err)
	}
	return nil
}

func (q *sqlQueue) work(ctx context.Context, handle func(int64)) error {
	var wg sync.WaitGroup
	errs := make([]error, q.d.workers)
	for w := range q.d.workers {
		wg.Go(func() { errs[w] = q.loop(ctx, handle) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loop claims, runs and acknowledges jobs until ctx is cancelled.
func (q *sqlQueue) loop(ctx context.Context, handle func(int64)) error {
	ids := make([]int64, 0, q.d.claimSize)
	for ctx.Err() == nil {
		ids = ids[:0]
		rows, err := q.pool.Query(ctx, q.d.claim, q.d.claimSize)
		if err != nil {
			return q.stopped(ctx, fmt.Errorf("claim: %w", err))
		}
		var ps []payload
		for rows.Next() {
			var id int64
			var p payload
			if err := rows.Scan(&id, &p); err != nil {
				rows.Close()
				return fmt.Errorf("scan claim: %w", err)
			}
			ids = append(ids, id)
			ps = append(ps, p)
		}
		if err := rows.Err(); err != nil {
			return q.stopped(ctx, fmt.Errorf("claim: %w", err))
		}
		if len(ids) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(q.d.idle):
			}
			continue
		}
		// Acknowledgements run on a context that is not cancelled, so that a
		// stop never strands claimed jobs in the middle of a batch.
		actx := context.WithoutCancel(ctx)
		for i, p := range ps {
			handle(p.N)
			if q.d.ackEach != "" {
				if _, err := q.pool.Exec(actx, q.d.ackEach, ids[i]); err != nil {
					return fmt.Errorf("mark done: %w", err)
				}
			}
		}
		if q.d.ackBatch != "" {
			if _, err := q.pool.Exec(actx, q.d.ackBatch, ids); err != nil {
				return fmt.Errorf("ack batch: %w", err)
			}
		}
	}
	return nil
}

// stopped hides errors caused by the cancellation of ctx.
func (q *sqlQueue) stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (q *sqlQueue) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := q.pool.QueryRow(ctx, q.d.remaining).Scan(&n)
	return n, err
}

func (q *sqlQueue) fillFinished(ctx context.Context, n int) error {
	if _, err := q.pool.Exec(ctx, q.d.fill, n); err != nil {
		return fmt.Errorf("insert finished rows: %w", err)
	}
	if _, err := q.pool.Exec(ctx, "VACUUM ANALYZE "+q.d.table); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

func (q *sqlQueue) claimStats() (int64, time.Duration, bool) { return 0, 0, false }
