package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/uniq"
)

// The uniq queue is unique by its payload's key (states pending and
// running), with a 10ms..50ms backoff, and keeps completed jobs.

// uniqIDs returns the ids of the uniq jobs by key, failing the test if a
// key appears twice among pending and running jobs.
func uniqIDs(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT coalesce(payload->>'key', '<none>'), id FROM skipjack.uniq WHERE state IN ('pending', 'running') ORDER BY id`)
	if err != nil {
		t.Fatalf("read uniq jobs: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var key string
		var id int64
		if err := rows.Scan(&key, &id); err != nil {
			t.Fatalf("scan: %v", err)
		}
		if prev, dup := out[key]; dup {
			t.Errorf("key %q is held by jobs %d and %d", key, prev, id)
		}
		out[key] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read uniq jobs: %v", err)
	}
	return out
}

// TestUniqueRace has 32 goroutines enqueue the same 100 keys in different
// orders: exactly one job per key exists afterwards, exactly 100 calls
// inserted, and every other call reports ErrDuplicate with the id of the
// job that holds its key.
func TestUniqueRace(t *testing.T) {
	t.Parallel()
	const goroutines, keys = 32, 100
	pool := newQueues(t, goroutines+2)
	ctx := context.Background()

	type result struct {
		key string
		id  int64
		dup bool
	}
	results := make(chan result, goroutines*keys)
	errs := make(chan error, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			order := rand.Perm(keys)
			<-start
			for _, k := range order {
				key := fmt.Sprintf("k%03d", k)
				id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: key, N: int64(g)})
				switch {
				case err == nil:
					results <- result{key: key, id: id}
				case errors.Is(err, skipjack.ErrDuplicate):
					results <- result{key: key, id: id, dup: true}
				default:
					errs <- fmt.Errorf("goroutine %d, key %s: %w", g, key, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	held := uniqIDs(t, pool)
	if len(held) != keys {
		t.Fatalf("%d keys have a job, want %d", len(held), keys)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.uniq`); n != keys {
		t.Errorf("%d jobs in the table, want %d", n, keys)
	}
	inserted, dups := 0, 0
	for r := range results {
		if r.dup {
			dups++
		} else {
			inserted++
		}
		if r.id != held[r.key] {
			t.Errorf("key %s: Enqueue reported id %d (duplicate %v), the job holding the key is %d", r.key, r.id, r.dup, held[r.key])
		}
	}
	if inserted != keys || dups != goroutines*keys-keys {
		t.Errorf("%d inserts and %d duplicates, want %d and %d", inserted, dups, keys, goroutines*keys-keys)
	}
}

// TestUniqueDuplicateInTx enqueues duplicates inside a transaction, of a
// job committed before and of one enqueued in the same transaction: each
// reports the existing id and the transaction stays usable and commits.
func TestUniqueDuplicateInTx(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	committed, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "a"})
	if err != nil {
		t.Fatalf("Enqueue a: %v", err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)

	id, err := uniq.Enqueue(ctx, tx, uniq.Payload{Key: "a", N: 1})
	if !errors.Is(err, skipjack.ErrDuplicate) || id != committed {
		t.Fatalf("duplicate of a committed job in a tx: got (%d, %v), want (%d, ErrDuplicate)", id, err, committed)
	}
	b, err := uniq.Enqueue(ctx, tx, uniq.Payload{Key: "b"})
	if err != nil {
		t.Fatalf("Enqueue b after a duplicate: %v", err)
	}
	id, err = uniq.Enqueue(ctx, tx, uniq.Payload{Key: "b", N: 1})
	if !errors.Is(err, skipjack.ErrDuplicate) || id != b {
		t.Fatalf("duplicate of a job of the same tx: got (%d, %v), want (%d, ErrDuplicate)", id, err, b)
	}
	var one int
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("statement after duplicates: %v (the transaction was aborted)", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after duplicates: %v", err)
	}
	held := uniqIDs(t, pool)
	if len(held) != 2 || held["a"] != committed || held["b"] != b {
		t.Errorf("jobs by key after commit: %v, want a=%d b=%d", held, committed, b)
	}
}

// TestUniqueEnqueueMany inserts a batch of which half duplicates existing
// jobs (and one key is repeated inside the batch): the other half is
// inserted and counted.
func TestUniqueEnqueueMany(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	for i := 0; i < 100; i += 2 {
		if _, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: fmt.Sprintf("k%03d", i)}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}
	before := uniqIDs(t, pool)
	var batch []uniq.Payload
	for i := range 100 {
		batch = append(batch, uniq.Payload{Key: fmt.Sprintf("k%03d", i), N: 1})
	}
	batch = append(batch, uniq.Payload{Key: "k001", N: 2}) // twice in the batch
	n, err := uniq.EnqueueMany(ctx, pool, batch)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if n != 50 {
		t.Errorf("EnqueueMany inserted %d, want 50", n)
	}
	after := uniqIDs(t, pool)
	if len(after) != 100 {
		t.Errorf("%d keys have a job, want 100", len(after))
	}
	for key, id := range before {
		if after[key] != id {
			t.Errorf("key %s: job %d replaced by %d", key, id, after[key])
		}
	}
	// The first of the repeated payloads wins.
	if got := queryInt(t, pool, `SELECT (payload->>'n')::bigint FROM skipjack.uniq WHERE payload->>'key' = 'k001'`); got != 1 {
		t.Errorf("k001 has n = %d, want the first payload of the batch (n = 1)", got)
	}
	// Options apply to the inserted jobs.
	n, err = uniq.EnqueueMany(ctx, pool, []uniq.Payload{{Key: "later"}, {Key: "k000"}}, skipjack.Delay(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("EnqueueMany with Delay: got (%d, %v), want (1, nil)", n, err)
	}
	if s, err := uniq.Stats(ctx, pool); err != nil || s.Scheduled != 1 {
		t.Errorf("Stats after a delayed batch: %+v, %v; want 1 scheduled", s, err)
	}
}

// TestUniqueSQLProducer enqueues from SQL as the reference documents: a
// plain INSERT of a duplicate fails on the unique index, INSERT ... ON
// CONFLICT DO NOTHING skips it.
func TestUniqueSQLProducer(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()
	const insert = `INSERT INTO skipjack.uniq (payload) VALUES ($1) ON CONFLICT DO NOTHING`
	for i, want := range []int64{1, 0} {
		tag, err := pool.Exec(ctx, insert, `{"key": "sql", "n": 7}`)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		if tag.RowsAffected() != want {
			t.Errorf("insert %d inserted %d rows, want %d", i, tag.RowsAffected(), want)
		}
	}
	// A key missing from the payload counts as null, and still collides.
	for i, want := range []int64{1, 0} {
		tag, err := pool.Exec(ctx, insert, `{"n": 1}`)
		if err != nil || tag.RowsAffected() != want {
			t.Errorf("insert without key %d: %v rows, %v; want %d", i, tag.RowsAffected(), err, want)
		}
	}
	_, err := pool.Exec(ctx, `INSERT INTO skipjack.uniq (payload) VALUES ('{"key": "sql"}')`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Errorf("plain INSERT of a duplicate: %v, want a unique_violation (23505)", err)
	}
	// Go producers see SQL producers' jobs as duplicates too.
	held := uniqIDs(t, pool)
	id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "sql"})
	if !errors.Is(err, skipjack.ErrDuplicate) || id != held["sql"] {
		t.Errorf("Enqueue of a SQL producer's key: (%d, %v), want (%d, ErrDuplicate)", id, err, held["sql"])
	}
}

// TestUniqueLifecycle runs a unique job through a retry and a snooze: it
// keeps its key meanwhile (duplicates report it), and once it completed
// its key is free again.
func TestUniqueLifecycle(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "job"})
	if err != nil {
		t.Fatal(err)
	}
	type attempt struct {
		attempt int
		dupID   int64
		dupErr  error
	}
	attempts := make(chan attempt, 10)
	calls := 0 // handler calls; Concurrency 1 runs them one at a time
	w := uniq.NewWorker(pool, func(ctx context.Context, job *uniq.Job) error {
		// While the job runs, its key is held.
		dupID, dupErr := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "job", N: 9})
		attempts <- attempt{job.Attempt, dupID, dupErr}
		calls++
		switch calls {
		case 1:
			return errors.New("first attempt fails")
		case 2:
			return skipjack.Snooze(10 * time.Millisecond)
		}
		return nil
	}, skipjack.WorkerConfig{Concurrency: 1, PollInterval: 20 * time.Millisecond, Logger: quietLogger(t)})
	stop := start(t, w)

	waitFor(t, 10*time.Second, "the job to complete", func() bool {
		r, err := uniq.Get(ctx, pool, id)
		return err == nil && r.State == skipjack.StateCompleted
	})
	stop()
	close(attempts)
	var got []int
	for a := range attempts {
		got = append(got, a.attempt)
		if !errors.Is(a.dupErr, skipjack.ErrDuplicate) || a.dupID != id {
			t.Errorf("attempt %d: duplicate Enqueue returned (%d, %v), want (%d, ErrDuplicate)", a.attempt, a.dupID, a.dupErr, id)
		}
	}
	if fmt.Sprint(got) != "[1 2 2]" {
		t.Errorf("attempts %v, want [1 2 2] (a retry, then a snooze that does not count)", got)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.uniq`); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
	// Completed is not a unique state: the key is free again.
	if _, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "job"}); err != nil {
		t.Errorf("Enqueue after the job completed: %v", err)
	}
}

// TestUniqueRetryDuplicate retries a failed unique job whose key a newer
// job took meanwhile: Retry skips it (there is a live job for the key)
// instead of failing, and retries the others.
func TestUniqueRetryDuplicate(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()

	var failed []int64
	for _, key := range []string{"taken", "free", "taken"} {
		id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := uniq.Cancel(ctx, pool, id); err != nil || n != 1 {
			t.Fatalf("Cancel: (%d, %v)", n, err)
		}
		failed = append(failed, id)
	}
	newer, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := uniq.Retry(ctx, pool, failed...)
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if n != 1 {
		t.Errorf("Retry changed %d jobs, want 1 (the free key)", n)
	}
	held := uniqIDs(t, pool)
	if held["taken"] != newer || held["free"] != failed[1] {
		t.Errorf("jobs by key after Retry: %v, want taken=%d free=%d", held, newer, failed[1])
	}
}

// TestUniqueRescue rescues a unique job whose worker died while running
// it: the job keeps its key while running and after the rescue, and runs
// again as the same job.
func TestUniqueRescue(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 0)
	ctx := context.Background()
	id, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "rescued"})
	if err != nil {
		t.Fatal(err)
	}
	// A worker claimed it and died: running, with a lapsed lease.
	if _, err := pool.Exec(ctx, `UPDATE skipjack.uniq SET state = 'running', attempt = attempt + 1, claim = claim + 1,
		lease_expires_at = now() - interval '1 second', worker = 'dead' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if dup, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "rescued", N: 1}); !errors.Is(err, skipjack.ErrDuplicate) || dup != id {
		t.Fatalf("Enqueue while the dead worker's claim stands: (%d, %v), want (%d, ErrDuplicate)", dup, err, id)
	}
	ran := make(chan *uniq.Job, 1)
	start(t, uniq.NewWorker(pool, func(ctx context.Context, job *uniq.Job) error {
		if dup, err := uniq.Enqueue(ctx, pool, uniq.Payload{Key: "rescued", N: 2}); !errors.Is(err, skipjack.ErrDuplicate) || dup != id {
			t.Errorf("Enqueue while the rescued job runs: (%d, %v), want (%d, ErrDuplicate)", dup, err, id)
		}
		ran <- job
		return nil
	}, skipjack.WorkerConfig{PollInterval: 20 * time.Millisecond, Logger: quietLogger(t)}))
	select {
	case job := <-ran:
		if job.ID != id || job.Rescues != 1 || job.Attempt != 1 {
			t.Errorf("rescued job ran as id %d, rescues %d, attempt %d; want %d, 1, 1", job.ID, job.Rescues, job.Attempt, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rescued job did not run")
	}
	waitFor(t, 5*time.Second, "the rescued job to complete", func() bool {
		r, err := uniq.Get(ctx, pool, id)
		return err == nil && r.State == skipjack.StateCompleted
	})
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack.uniq`); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
}
