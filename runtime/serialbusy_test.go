package skipjack_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/keyed"
)

// busyAccount is the serial key of the busy key's jobs in the serial tests
// below; churned jobs have keys of their own.
const busyAccount = -1

// TestSerialClaimSkipsBusyKey churns jobs of distinct serial keys through
// a serial queue and compares the buffers its table and indexes were read
// in per churned job: first alone, then with one key's 10,000 jobs queued
// among them (4 before each churned job, behind a first job of the key
// whose handler runs until the churn ends), then with those jobs queued
// ahead of all of them. A claim that read past the busy key's queue would
// probe every job of the key it met (3 buffers each: about 30,000 a claim
// with the key's jobs ahead); with the key recorded as busy, a claim looks
// its first job up and skips the rest by key.
//
// With the key's jobs among the others, the bound is the issue's: at most
// 1.5x the buffers without them (measured in 7 runs, 4 at load 8-10: 1.01x
// to 1.21x). With the key's jobs ahead of everything, a claim still reads
// the claim index and the table's pages past them (about 240 buffers for
// 10,000 jobs, no probe), which small claims pay per job: measured 1.15x
// to 1.47x, bounded at 2x so that smaller claims on a loaded machine keep
// it. Without the busy
// key, the two cost 10x and 20x.
//
// Buffers are counted, not timed, so the bounds hold on a loaded machine.
func TestSerialClaimSkipsBusyKey(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	const jobs, queued = 2500, 10000
	clean := churnSerial(t, pool, 0, jobs, 0)
	t.Logf("no busy key: %.1f buffers per job", clean)

	among := churnSerial(t, pool, jobs, jobs, queued/jobs)
	t.Logf("one key's %d jobs queued among them: %.1f buffers per job", queued, among)
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_busy WHERE queue = 'keyed' AND key = $1::jsonb`, fmt.Sprint(busyAccount)); n != 1 {
		t.Fatalf("the key with %d queued jobs is recorded busy %d times, want 1", queued, n)
	}
	if limit := 1.5 * clean; among > limit {
		t.Errorf("with one key's %d jobs queued among the others, the queue's table was read in %.1f buffers per churned job, want at most %.1f (1.5x the %.1f without them)", queued, among, limit, clean)
	}

	ahead := churnSerial(t, pool, 2*jobs, jobs, 0)
	t.Logf("one key's %d jobs queued ahead of them: %.1f buffers per job", queued-1, ahead)
	if limit := 2 * clean; ahead > limit {
		t.Errorf("with one key's %d jobs queued ahead of the others, the queue's table was read in %.1f buffers per churned job, want at most %.1f (2x the %.1f without them)", queued-1, ahead, limit, clean)
	}

	// Once the key has no job left, a claim finds it so and forgets it.
	if _, err := pool.Exec(ctx, `DELETE FROM skipjack.keyed WHERE payload->'account' = $1::jsonb`, fmt.Sprint(busyAccount)); err != nil {
		t.Fatal(err)
	}
	churnSerial(t, pool, 3*jobs, 10, 0)
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_busy WHERE queue = 'keyed'`); n != 0 {
		t.Errorf("%d busy keys recorded after the busy key's jobs were deleted and a claim ran, want 0", n)
	}
}

// churnSerial enqueues, in one statement, n jobs of the serial queue
// keyed, due a minute ago, each with a key of its own (accounts from first
// on), each after busyEach jobs of busyAccount; works them with a worker
// at WorkerConfig's defaults (a job of busyAccount runs until the n jobs
// ran); and returns the buffers (hits and reads) of the queue's table and
// indexes per churned job, from the enqueue's end on: what claims and
// acknowledgements read.
func churnSerial(t *testing.T, pool *pgxpool.Pool, first, n, busyEach int) float64 {
	t.Helper()
	ctx := context.Background()
	var ps []keyed.Payload
	for i := range n {
		for range busyEach {
			ps = append(ps, keyed.Payload{Account: busyAccount, N: int64(len(ps))})
		}
		ps = append(ps, keyed.Payload{Account: int64(first + i), N: int64(i)})
	}
	// On a connection of its own, closed once it enqueued: a closing
	// connection flushes its statistics, which an idle one in the pool
	// holds back for up to 10s.
	conn, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	_, err = keyed.EnqueueMany(ctx, conn, ps, skipjack.RunAt(time.Now().Add(-time.Minute)))
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	before := readTableBuffers(t, pool, "keyed")
	runs, done := newTally(), make(chan struct{})
	stop := start(t, keyed.NewWorker(pool, func(ctx context.Context, job *keyed.Job) error {
		if job.Payload.Account == busyAccount {
			select {
			case <-done:
			case <-ctx.Done():
			}
			return errors.New("stopped")
		}
		runs.add(job.ID)
		return nil
	}, skipjack.WorkerConfig{PollInterval: 5 * time.Second, Logger: quietLogger(t)}))
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d jobs", n), func() bool { return runs.len() >= n })
	close(done)
	// The worker's connections close when it stops, and a closing
	// connection flushes its statistics.
	stop()
	return float64(readTableBuffers(t, pool, "keyed")-before) / float64(n)
}

// readTableBuffers returns the buffers (hits and reads) of table and its
// indexes, once they stop changing.
func readTableBuffers(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	const stats = `SELECT heap_blks_hit + heap_blks_read + coalesce(idx_blks_hit + idx_blks_read, 0)
		FROM pg_statio_user_tables WHERE schemaname = 'skipjack' AND relname = $1`
	return settled(t, "the table's statistics", func() int64 { return queryInt(t, pool, stats, table) })
}

// settled returns what read returns once three reads 200ms apart agree:
// the statistics of a connection that closes arrive shortly after it
// closed.
func settled[T comparable](t *testing.T, what string, read func() T) T {
	t.Helper()
	last := read()
	stable := 0
	waitFor(t, 30*time.Second, what+" to settle", func() bool {
		time.Sleep(200 * time.Millisecond)
		s := read()
		if s == last {
			stable++
		} else {
			stable = 0
		}
		last = s
		return stable >= 2
	})
	return last
}
