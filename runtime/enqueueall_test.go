package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/fast"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/keyed"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tick"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// enqueueQueue is one test queue seen through the three enqueue paths of
// its generated package, its payloads made from an int64 n (stored as the
// payload's n; for uniq, n also makes the unique key, so equal ns are
// duplicates).
type enqueueQueue struct {
	table       string
	unique      bool
	maxAttempts int // the queue's max_attempts
	one         func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error)
	many        func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error)
	all         func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) ([]skipjack.EnqueueResult, error)
	// worker returns a worker whose handler returns handle(job id).
	worker func(pool *pgxpool.Pool, handle func(id int64) error, cfg skipjack.WorkerConfig) runner
}

// enqueueVia adapts the generated functions of one queue package.
func enqueueVia[P any](table string, unique bool, maxAttempts int, payload func(n int64) P,
	one func(context.Context, skipjack.DBTX, P, ...skipjack.EnqueueOption) (int64, error),
	many func(context.Context, skipjack.DBTX, []P, ...skipjack.EnqueueOption) (int64, error),
	all func(context.Context, skipjack.DBTX, []P, ...skipjack.EnqueueOption) ([]skipjack.EnqueueResult, error),
	newWorker func(*pgxpool.Pool, func(context.Context, *skipjack.Job[P]) error, skipjack.WorkerConfig) *skipjack.Worker[P],
) enqueueQueue {
	payloads := func(ns []int64) []P {
		ps := make([]P, len(ns))
		for i, n := range ns {
			ps[i] = payload(n)
		}
		return ps
	}
	return enqueueQueue{
		table: table, unique: unique, maxAttempts: maxAttempts,
		one: func(ctx context.Context, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) (int64, error) {
			return one(ctx, db, payload(n), o...)
		},
		many: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) (int64, error) {
			return many(ctx, db, payloads(ns), o...)
		},
		all: func(ctx context.Context, db skipjack.DBTX, ns []int64, o ...skipjack.EnqueueOption) ([]skipjack.EnqueueResult, error) {
			return all(ctx, db, payloads(ns), o...)
		},
		worker: func(pool *pgxpool.Pool, handle func(id int64) error, cfg skipjack.WorkerConfig) runner {
			return newWorker(pool, func(_ context.Context, job *skipjack.Job[P]) error { return handle(job.ID) }, cfg)
		},
	}
}

// enqueueQueues returns a queue of every kind the generator renders the
// enqueue queries of differently, or whose other queries could interfere
// with them: plain, short retries, priority, unique, serial, limited and
// periodic.
func enqueueQueues() []enqueueQueue {
	return []enqueueQueue{
		enqueueVia("demo", false, 25, func(n int64) demo.Payload { return demo.Payload{N: n} }, demo.Enqueue, demo.EnqueueMany, demo.EnqueueAll, demo.NewWorker),
		enqueueVia("fast", false, 3, func(n int64) fast.Payload { return fast.Payload{N: n} }, fast.Enqueue, fast.EnqueueMany, fast.EnqueueAll, fast.NewWorker),
		enqueueVia("ranked", false, 25, func(n int64) ranked.Payload { return ranked.Payload{N: n} }, ranked.Enqueue, ranked.EnqueueMany, ranked.EnqueueAll, ranked.NewWorker),
		enqueueVia("uniq", true, 25, func(n int64) uniq.Payload { return uniq.Payload{Key: uniqKey(n), N: n} }, uniq.Enqueue, uniq.EnqueueMany, uniq.EnqueueAll, uniq.NewWorker),
		enqueueVia("keyed", false, 25, func(n int64) keyed.Payload { return keyed.Payload{Account: n % 2, N: n} }, keyed.Enqueue, keyed.EnqueueMany, keyed.EnqueueAll, keyed.NewWorker),
		enqueueVia("capped", false, 25, func(n int64) capped.Payload { return capped.Payload{N: n} }, capped.Enqueue, capped.EnqueueMany, capped.EnqueueAll, capped.NewWorker),
		enqueueVia("tick", false, 25, func(n int64) tick.Payload { return tick.Payload{N: n} }, tick.Enqueue, tick.EnqueueMany, tick.EnqueueAll, tick.NewWorker),
	}
}

// TestEnqueueAllResults checks, on every kind of queue, that EnqueueAll
// returns one result per payload in the order given, each the id of the
// row holding that payload, ids ascending in input order; duplicates (of
// each other within the call and of existing jobs) carry the id of the
// job holding their key, and insert nothing. Kills
// enqueueall-results-unordered and enqueueall-duplicate-unmapped.
func TestEnqueueAllResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, q := range enqueueQueues() {
		t.Run(q.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 4)
			if rs, err := q.all(ctx, pool, nil); err != nil || len(rs) != 0 {
				t.Fatalf("EnqueueAll(nil) = %v, %v; want no results, nil", rs, err)
			}
			// Distinct payloads in an order that is not sorted, so that
			// results sorted by id or by payload would be caught.
			ns := []int64{50, 30, 90, 10, 70, 20, 80, 60, 40}
			if q.unique {
				// 30 is held by an existing job; 10 and 70 repeat within
				// the call, 10 twice.
				ns = []int64{50, 30, 90, 10, 70, 10, 80, 70, 10}
			}
			var held int64
			if q.unique {
				var err error
				if held, err = q.one(ctx, pool, 30); err != nil {
					t.Fatalf("Enqueue(30): %v", err)
				}
			}
			rs, err := q.all(ctx, pool, ns)
			if err != nil {
				t.Fatalf("EnqueueAll: %v", err)
			}
			if len(rs) != len(ns) {
				t.Fatalf("EnqueueAll of %d payloads returned %d results", len(ns), len(rs))
			}
			rows := readRows(t, pool, q.table)
			first := map[int64]int64{} // n -> id of the job inserted for it
			if q.unique {
				first[30] = held
			}
			var last int64
			for i, n := range ns {
				r := rs[i]
				if id, seen := first[n]; seen {
					if !r.Duplicate || r.ID != id {
						t.Errorf("result %d (n=%d) = %+v, want {ID:%d Duplicate:true} (the holder)", i, n, r, id)
					}
					continue
				}
				if r.Duplicate {
					t.Errorf("result %d (n=%d) = %+v, want a new job", i, n, r)
					continue
				}
				first[n] = r.ID
				if r.ID <= last {
					t.Errorf("result %d (n=%d) has id %d, not above the previous new job's %d", i, n, r.ID, last)
				}
				last = r.ID
				row, ok := rows[r.ID]
				switch {
				case !ok:
					t.Errorf("result %d (n=%d): no row with id %d", i, n, r.ID)
				case row.N != n || row.State != "pending" || row.MaxAttempts != q.maxAttempts:
					t.Errorf("result %d: row %d holds n=%d state %s max_attempts %d, want n=%d pending %d", i, r.ID, row.N, row.State, row.MaxAttempts, n, q.maxAttempts)
				}
			}
			if len(rows) != len(first) {
				t.Errorf("the table holds %d rows, want %d (one per distinct payload)", len(rows), len(first))
			}
		})
	}
}

// TestEnqueueAllTx checks that EnqueueAll runs in the caller's
// transaction: its jobs are visible inside it, gone after a rollback,
// there after a commit, and a duplicate leaves the transaction usable.
// Kills enqueueall-outside-tx.
func TestEnqueueAllTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, q := range enqueueQueues() {
		for _, commit := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/commit=%v", q.table, commit), func(t *testing.T) {
				t.Parallel()
				pool := newQueues(t, 4)
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				ns := []int64{1, 2, 3, 2}
				rs, err := q.all(ctx, tx, ns)
				if err != nil {
					t.Fatalf("EnqueueAll in a tx: %v", err)
				}
				want := 4
				if q.unique {
					want = 3
					if !rs[3].Duplicate || rs[3].ID != rs[1].ID {
						t.Errorf("the repeated payload's result is %+v, want the id %d of the first", rs[3], rs[1].ID)
					}
				}
				if got := len(readRows(t, tx, q.table)); got != want {
					t.Fatalf("inside the tx: %d rows, want %d", got, want)
				}
				if got := len(readRows(t, pool, q.table)); got != 0 {
					t.Fatalf("outside the uncommitted tx: %d rows, want 0", got)
				}
				// The transaction is still usable after a duplicate.
				if _, err := q.one(ctx, tx, 9); err != nil {
					t.Fatalf("Enqueue after EnqueueAll in the same tx: %v", err)
				}
				want++
				if commit {
					if err := tx.Commit(ctx); err != nil {
						t.Fatalf("commit: %v", err)
					}
				} else if err := tx.Rollback(ctx); err != nil {
					t.Fatalf("rollback: %v", err)
				}
				rows := readRows(t, pool, q.table)
				if !commit {
					want = 0
				}
				if len(rows) != want {
					t.Fatalf("after commit=%v: %d rows, want %d", commit, len(rows), want)
				}
				for _, r := range rs {
					if _, ok := rows[r.ID]; commit && !ok {
						t.Errorf("committed result %+v has no row", r)
					}
				}
			})
		}
	}
}

// TestEnqueueAllHolderCommittedMeanwhile checks the duplicate whose holder
// another transaction commits while EnqueueAll's statement runs: the
// statement waits on that transaction's uncommitted row, finds the key
// taken, but its snapshot cannot see the holder, so EnqueueAll looks it up
// again. Kills enqueueall-no-holder-lookup.
func TestEnqueueAllHolderCommittedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newQueues(t, 4)
	other, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	held, err := uniq.Enqueue(ctx, other, uniq.Payload{Key: uniqKey(7), N: 7})
	if err != nil {
		t.Fatalf("Enqueue in the other tx: %v", err)
	}
	type result struct {
		rs  []skipjack.EnqueueResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		rs, err := uniq.EnqueueAll(ctx, pool, []uniq.Payload{{Key: uniqKey(6), N: 6}, {Key: uniqKey(7), N: 7}})
		done <- result{rs, err}
	}()
	// Wait until the insert waits on the other transaction's row.
	waitFor(t, time.Minute, "EnqueueAll to wait on the uncommitted duplicate", func() bool {
		return queryInt(t, pool, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%EnqueueAll%'`) > 0
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatalf("commit the other tx: %v", err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("EnqueueAll did not return within a minute of the commit")
	}
	if r.err != nil {
		t.Fatalf("EnqueueAll: %v", r.err)
	}
	if len(r.rs) != 2 || r.rs[0].Duplicate || r.rs[0].ID == 0 || r.rs[1] != (skipjack.EnqueueResult{ID: held, Duplicate: true}) {
		t.Fatalf("EnqueueAll = %+v, want [{new false} {%d true}]", r.rs, held)
	}
}

// TestMaxAttemptsRows checks that MaxAttempts(n) sets the max_attempts of
// the jobs of each enqueue path on every kind of queue, that jobs without
// it keep the queue's, and that an n below 1 is refused with an error that
// says so before anything is inserted. Kills maxattempts-ignored-one,
// maxattempts-ignored-many and maxattempts-ignored-all.
func TestMaxAttemptsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := []struct {
		name string
		call func(q enqueueQueue, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) error
	}{
		{"Enqueue", func(q enqueueQueue, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) error {
			_, err := q.one(ctx, db, n, o...)
			return err
		}},
		{"EnqueueMany", func(q enqueueQueue, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) error {
			_, err := q.many(ctx, db, []int64{n, n + 1}, o...)
			return err
		}},
		{"EnqueueAll", func(q enqueueQueue, db skipjack.DBTX, n int64, o ...skipjack.EnqueueOption) error {
			_, err := q.all(ctx, db, []int64{n, n + 1}, o...)
			return err
		}},
	}
	for _, q := range enqueueQueues() {
		t.Run(q.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 4)
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			for i, p := range paths {
				for _, db := range []struct {
					name string
					db   skipjack.DBTX
				}{{"pool", pool}, {"tx", tx}} {
					for j, c := range []struct {
						opts []skipjack.EnqueueOption
						want int
					}{
						{nil, q.maxAttempts},
						{[]skipjack.EnqueueOption{skipjack.MaxAttempts(1)}, 1},
						{[]skipjack.EnqueueOption{skipjack.MaxAttempts(7), skipjack.Delay(time.Hour)}, 7},
					} {
						n := int64(1000*i + 100*j)
						if db.name == "tx" {
							n += 10
						}
						if err := p.call(q, db.db, n, c.opts...); err != nil {
							t.Fatalf("%s on a %s with %d options: %v", p.name, db.name, len(c.opts), err)
						}
						for _, r := range readRows(t, db.db, q.table) {
							if r.N == n && r.MaxAttempts != c.want {
								t.Errorf("%s on a %s: job n=%d has max_attempts %d, want %d", p.name, db.name, n, r.MaxAttempts, c.want)
							}
						}
					}
				}
				before := len(readRows(t, pool, q.table))
				for _, bad := range []int{0, -1} {
					err := p.call(q, pool, 99999, skipjack.MaxAttempts(bad))
					if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("MaxAttempts(%d)", bad)) {
						t.Errorf("%s with MaxAttempts(%d) = %v, want an error naming it", p.name, bad, err)
					}
				}
				if after := len(readRows(t, pool, q.table)); after != before {
					t.Errorf("%s with an invalid MaxAttempts inserted %d jobs", p.name, after-before)
				}
			}
		})
	}
}

// TestMaxAttemptsFailsForGood runs a handler that always fails on jobs
// enqueued with MaxAttempts(1) through each enqueue path, beside a job
// without it, on a queue whose max_attempts is higher: each MaxAttempts(1)
// job fails for good after its one attempt while the other is retried.
// uniq covers the unique enqueue statements, demo COPY. Kills
// maxattempts-ignored-one, maxattempts-ignored-many and
// maxattempts-ignored-all end to end.
func TestMaxAttemptsFailsForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, q := range enqueueQueues() {
		if q.table != "uniq" && q.table != "demo" {
			continue
		}
		t.Run(q.table, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 12)
			one, err := q.one(ctx, pool, 1, skipjack.MaxAttempts(1))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.many(ctx, pool, []int64{2}, skipjack.MaxAttempts(1)); err != nil {
				t.Fatal(err)
			}
			rs, err := q.all(ctx, pool, []int64{3}, skipjack.MaxAttempts(1))
			if err != nil {
				t.Fatal(err)
			}
			other, err := q.one(ctx, pool, 4)
			if err != nil {
				t.Fatal(err)
			}
			var many int64
			for id, r := range readRows(t, pool, q.table) {
				if r.N == 2 {
					many = id
				}
			}
			once := []int64{one, many, rs[0].ID}
			attempts := newTally()
			// demo retries no sooner than a second: poll often so the
			// retry of other does not wait for the poll interval too.
			w := q.worker(pool, func(id int64) error {
				attempts.add(id)
				return errors.New("always fails")
			}, skipjack.WorkerConfig{Concurrency: 4, PollInterval: 50 * time.Millisecond, Logger: quietLogger(t)})
			stop := start(t, w)
			waitFor(t, 2*time.Minute, "the MaxAttempts(1) jobs to fail and the other to be retried", func() bool {
				rows := readRows(t, pool, q.table)
				for _, id := range once {
					if rows[id].State != "failed" {
						return false
					}
				}
				return rows[other].Attempt >= 2
			})
			stop()
			rows := readRows(t, pool, q.table)
			for _, id := range once {
				if r := rows[id]; r.Attempt != 1 || attempts.count(id) != 1 {
					t.Errorf("job %d (n=%d) failed after attempt %d with %d handler runs, want 1 and 1", id, r.N, r.Attempt, attempts.count(id))
				}
			}
			if r := rows[other]; r.State == "failed" || r.MaxAttempts != q.maxAttempts {
				t.Errorf("the job without MaxAttempts is %s with max_attempts %d, want retried under %d", r.State, r.MaxAttempts, q.maxAttempts)
			}
		})
	}
}

// BenchmarkEnqueueAll measures EnqueueAll beside EnqueueMany (COPY) on
// the demo queue; the bench module compares both with River.
func BenchmarkEnqueueAll(b *testing.B) {
	pool := newQueues(b, 4)
	ctx := context.Background()
	for _, size := range []int{1, 100, 10000} {
		ps := make([]demo.Payload, size)
		for i := range ps {
			ps[i] = demo.Payload{N: int64(i), Label: "x"}
		}
		b.Run(fmt.Sprintf("EnqueueAll/%d", size), func(b *testing.B) {
			for b.Loop() {
				if _, err := demo.EnqueueAll(ctx, pool, ps); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("EnqueueMany/%d", size), func(b *testing.B) {
			for b.Loop() {
				if _, err := demo.EnqueueMany(ctx, pool, ps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
