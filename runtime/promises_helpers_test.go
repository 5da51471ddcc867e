package skipjack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// The promises_*_test.go files check what the feature layer promises
// (docs/reference.md): which rows, states, times and order a call leaves
// behind, computed from its inputs. Each one names the mutant of
// scripts/mutants.sh it kills.

// promiseQueue is one test queue seen through its generated package, so
// that a promise can be checked on every kind of queue the generator
// renders differently: plain (demo, fast), priority (ranked) and unique
// (uniq, whose key is derived from n).
type promiseQueue struct {
	table    string
	priority bool // declared with priority: true
	enqueue  func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error)
	many     func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error)
	// worker returns a worker of the queue whose handler calls handle with
	// the job's id, payload n and run_at, and completes the job.
	worker func(pool *pgxpool.Pool, handle func(id, n int64, runAt time.Time), cfg skipjack.WorkerConfig) runner
}

// uniqKey is the unique key of the uniq job with payload n.
func uniqKey(n int64) string { return fmt.Sprintf("k%d", n) }

// promiseQueues returns the queues a promise is checked on.
func promiseQueues() []promiseQueue {
	return []promiseQueue{{
		table: "demo",
		enqueue: func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error) {
			return demo.Enqueue(ctx, db, demo.Payload{N: n}, o...)
		},
		many: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error) {
			ps := make([]demo.Payload, len(ns))
			for i, n := range ns {
				ps[i].N = n
			}
			return demo.EnqueueMany(ctx, db, ps, o...)
		},
		worker: func(pool *pgxpool.Pool, handle func(id, n int64, runAt time.Time), cfg skipjack.WorkerConfig) runner {
			return demo.NewWorker(pool, func(_ context.Context, job *demo.Job) error {
				handle(job.ID, job.Payload.N, job.RunAt)
				return nil
			}, cfg)
		},
	}, {
		table: "fast",
		enqueue: func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error) {
			return fast.Enqueue(ctx, db, fast.Payload{N: n}, o...)
		},
		many: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error) {
			ps := make([]fast.Payload, len(ns))
			for i, n := range ns {
				ps[i].N = n
			}
			return fast.EnqueueMany(ctx, db, ps, o...)
		},
		worker: func(pool *pgxpool.Pool, handle func(id, n int64, runAt time.Time), cfg skipjack.WorkerConfig) runner {
			return fast.NewWorker(pool, func(_ context.Context, job *fast.Job) error {
				handle(job.ID, job.Payload.N, job.RunAt)
				return nil
			}, cfg)
		},
	}, {
		table:    "ranked",
		priority: true,
		enqueue: func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error) {
			return ranked.Enqueue(ctx, db, ranked.Payload{N: n}, o...)
		},
		many: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error) {
			ps := make([]ranked.Payload, len(ns))
			for i, n := range ns {
				ps[i].N = n
			}
			return ranked.EnqueueMany(ctx, db, ps, o...)
		},
		worker: func(pool *pgxpool.Pool, handle func(id, n int64, runAt time.Time), cfg skipjack.WorkerConfig) runner {
			return ranked.NewWorker(pool, func(_ context.Context, job *ranked.Job) error {
				handle(job.ID, job.Payload.N, job.RunAt)
				return nil
			}, cfg)
		},
	}, {
		table: "uniq",
		enqueue: func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error) {
			return uniq.Enqueue(ctx, db, uniq.Payload{Key: uniqKey(n), N: n}, o...)
		},
		many: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error) {
			ps := make([]uniq.Payload, len(ns))
			for i, n := range ns {
				ps[i] = uniq.Payload{Key: uniqKey(n), N: n}
			}
			return uniq.EnqueueMany(ctx, db, ps, o...)
		},
		worker: func(pool *pgxpool.Pool, handle func(id, n int64, runAt time.Time), cfg skipjack.WorkerConfig) runner {
			return uniq.NewWorker(pool, func(_ context.Context, job *uniq.Job) error {
				handle(job.ID, job.Payload.N, job.RunAt)
				return nil
			}, cfg)
		},
	}}
}

// row is a job row with every column a feature promise is about.
type row struct {
	ID              int64
	State           string
	Attempt         int
	MaxAttempts     int
	Priority        int
	Claim           int
	RunAt           time.Time
	CreatedAt       time.Time
	FinishedAt      *time.Time
	CancelRequested bool
	Errors          int // entries in the error history
	N               int64
}

// readRows reads the rows of table with the given ids (all rows when ids
// is empty), by id.
func readRows(t testing.TB, db skipjack.DBTX, table string, ids ...int64) map[int64]row {
	t.Helper()
	rows, err := db.Query(context.Background(), fmt.Sprintf(`SELECT id, state, attempt, max_attempts, priority, claim,
		run_at, created_at, finished_at, cancel_requested, jsonb_array_length(errors), (payload->>'n')::bigint
		FROM skipjack.%q WHERE coalesce(cardinality($1::bigint[]), 0) = 0 OR id = ANY($1) ORDER BY id`, table), ids)
	if err != nil {
		t.Fatalf("read %s rows: %v", table, err)
	}
	defer rows.Close()
	out := map[int64]row{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ID, &r.State, &r.Attempt, &r.MaxAttempts, &r.Priority, &r.Claim,
			&r.RunAt, &r.CreatedAt, &r.FinishedAt, &r.CancelRequested, &r.Errors, &r.N); err != nil {
			t.Fatalf("scan %s row: %v", table, err)
		}
		out[r.ID] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read %s rows: %v", table, err)
	}
	return out
}

// dbNow returns the database's now() (the start of a transaction of its
// own): bracketing a call with two of them bounds every now() the call's
// statements saw.
func dbNow(t testing.TB, db skipjack.DBTX) time.Time {
	t.Helper()
	var now time.Time
	if err := db.QueryRow(context.Background(), `SELECT now()`).Scan(&now); err != nil {
		t.Fatalf("SELECT now(): %v", err)
	}
	return now
}

// micro returns t as the database stores it: whole microseconds, without
// a monotonic clock reading.
func micro(t time.Time) time.Time { return time.UnixMicro(t.UnixMicro()) }
