package skipjack_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/ranked"
)

// floorQueue is a test queue whose claims keep floors (issue 42): one
// without priorities and one with, whose claims keep a floor per priority.
type floorQueue struct {
	name string
	// enqueue inserts n jobs due at runAt (ranked: of priorities 0, 1 and
	// 2 in turn), in one statement.
	enqueue func(ctx context.Context, pool *pgxpool.Pool, n int, runAt time.Time) error
	// worker returns a worker that calls ran with each job's id.
	worker func(pool *pgxpool.Pool, ran func(id int64), cfg skipjack.WorkerConfig) runner
}

var floorQueues = []floorQueue{
	{
		name: "demo",
		enqueue: func(ctx context.Context, pool *pgxpool.Pool, n int, runAt time.Time) error {
			ps := make([]demo.Payload, n)
			for i := range ps {
				ps[i] = demo.Payload{N: int64(i), Label: "floor"}
			}
			_, err := demo.EnqueueMany(ctx, pool, ps, skipjack.RunAt(runAt))
			return err
		},
		worker: func(pool *pgxpool.Pool, ran func(int64), cfg skipjack.WorkerConfig) runner {
			return demo.NewWorker(pool, func(_ context.Context, job *demo.Job) error { ran(job.ID); return nil }, cfg)
		},
	},
	{
		name: "ranked",
		enqueue: func(ctx context.Context, pool *pgxpool.Pool, n int, runAt time.Time) error {
			for p := range 3 {
				ps := make([]ranked.Payload, 0, n/3+1)
				for i := p; i < n; i += 3 {
					ps = append(ps, ranked.Payload{N: int64(i)})
				}
				if _, err := ranked.EnqueueMany(ctx, pool, ps, skipjack.RunAt(runAt), skipjack.Priority(p)); err != nil {
					return err
				}
			}
			return nil
		},
		worker: func(pool *pgxpool.Pool, ran func(int64), cfg skipjack.WorkerConfig) runner {
			return ranked.NewWorker(pool, func(_ context.Context, job *ranked.Job) error { ran(job.ID); return nil }, cfg)
		},
	},
}

// claimWork is what the claims of one churn read, per job: claim index
// entries (pg_stat_user_indexes.idx_tup_read, every entry a scan returned,
// dead or alive) and shared buffers of the claim index and the table
// (pg_statio_*: hits and reads), the latter also counting the enqueue and
// the acknowledgement of every job.
type claimWork struct {
	entries, indexBuffers, tableBuffers float64
}

func (w claimWork) String() string {
	return fmt.Sprintf("%.1f claim index entries, %.1f claim index buffers, %.1f table buffers per job", w.entries, w.indexBuffers, w.tableBuffers)
}

// TestFlooredClaimUnderPinnedHorizon churns jobs through a queue with a
// clean xmin horizon, then again while another session holds a
// transaction id open (BEGIN; SELECT txid_current()), and compares what
// the claims read per job. While the horizon is pinned, no claimed job's
// entry can leave the claim index or be marked dead, so a claim that
// reads the index from its start walks the entry of every job claimed
// since the pin began: with 3,000 jobs claimed 20 at a time, 200 to 300
// entries per job (and about 80 with a clean horizon: entries are marked
// dead only once no snapshot can see them, and not on leaf pages that
// changed while the scan read them). Claims that read from their floors
// on walk only the entries of the claims just before them.
//
// Entries are counted, not timed, so the bound holds on a loaded machine;
// only the sweeps (one claim per PollInterval reads the whole index) come
// with time, and the poll interval leaves room for a few. Buffers are
// logged: in a test this small every dead entry's heap page is one just
// visited, so they grow far less than the entries do.
func TestFlooredClaimUnderPinnedHorizon(t *testing.T) {
	t.Parallel()
	for _, q := range floorQueues {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 20)
			const jobs = 3000
			clean := churn(t, pool, q, jobs)
			t.Logf("clean horizon: %v", clean)
			pinHorizon(t, pool)
			pinned := churn(t, pool, q, jobs)
			t.Logf("pinned horizon: %v", pinned)
			// A floored claim reads the entries of the claims just before
			// it (two in flight, 20 jobs each) and the jobs it takes:
			// about 3 per job, plus what the few sweeps read.
			const most = 15
			if limit := min(3*clean.entries+3, most); pinned.entries > limit {
				t.Errorf("with the horizon pinned, claims read %.1f claim index entries per job, want at most %.1f (3x the %.1f of a clean horizon plus 3, at most %d)", pinned.entries, limit, clean.entries, most)
			}
		})
	}
}

// pinHorizon opens a transaction that holds a transaction id, in a session
// of its own, until the test ends: no row version deleted after it can be
// removed from the test's database, nor its index entries marked dead.
func pinHorizon(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT txid_current()"); err != nil {
		t.Fatal(err)
	}
}

// churn enqueues n jobs of q due a minute ago, works them with a worker
// that claims at most 20 at a time, and returns what the claims read.
func churn(t *testing.T, pool *pgxpool.Pool, q floorQueue, n int) claimWork {
	t.Helper()
	ctx := context.Background()
	before := readClaimStats(t, pool, q.name)
	if err := q.enqueue(ctx, pool, n, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	runs := newTally()
	stop := start(t, q.worker(pool, runs.add, skipjack.WorkerConfig{
		Concurrency: 10, BatchSize: 20, PollInterval: 5 * time.Second, Logger: quietLogger(t),
	}))
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d jobs", n), func() bool { return runs.len() >= n })
	// The worker's connections close when it stops, and a closing
	// connection flushes its statistics.
	stop()
	after := readClaimStats(t, pool, q.name)
	per := func(a, b int64) float64 { return float64(a-b) / float64(n) }
	return claimWork{
		entries:      per(after[0], before[0]),
		indexBuffers: per(after[1], before[1]),
		tableBuffers: per(after[2], before[2]),
	}
}

// readClaimStats returns the claim index's entries read and buffers, and
// the table's heap buffers, once they stop changing (the statistics of a
// connection that closes arrive shortly after it closed).
func readClaimStats(t *testing.T, pool *pgxpool.Pool, queue string) [3]int64 {
	t.Helper()
	const stats = `SELECT i.idx_tup_read, coalesce(b.idx_blks_hit + b.idx_blks_read, 0),
		coalesce(h.heap_blks_hit + h.heap_blks_read, 0)
		FROM pg_stat_user_indexes AS i
		JOIN pg_statio_user_indexes AS b USING (indexrelid)
		JOIN pg_statio_user_tables AS h ON h.relid = i.relid
		WHERE i.schemaname = 'skipjack' AND i.indexrelname = $1`
	return settled(t, "the claim statistics", func() [3]int64 {
		var s [3]int64
		if err := pool.QueryRow(context.Background(), stats, queue+"_claim_idx").Scan(&s[0], &s[1], &s[2]); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestJobBelowFloorIsClaimed enqueues, while a worker's claims read from
// their floors on, a job due an hour ago: below every floor, so only a
// sweep (a claim that reads the whole claim index, one per PollInterval)
// finds it. It must run within a few poll intervals while other jobs keep
// arriving, each claim of which reads from the floors on.
func TestJobBelowFloorIsClaimed(t *testing.T) {
	t.Parallel()
	for _, q := range floorQueues {
		t.Run(q.name, func(t *testing.T) {
			t.Parallel()
			pool := newQueues(t, 20)
			ctx := context.Background()
			const poll = time.Second
			var mu sync.Mutex
			ranAt := make(map[int64]time.Time)
			stop := start(t, q.worker(pool, func(id int64) {
				mu.Lock()
				ranAt[id] = time.Now()
				mu.Unlock()
			}, skipjack.WorkerConfig{Concurrency: 10, BatchSize: 20, PollInterval: poll, Logger: quietLogger(t)}))
			defer stop()
			ran := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(ranAt)
			}
			// Claims that take jobs set the floors.
			if err := q.enqueue(ctx, pool, 100, time.Now()); err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Minute, "the first 100 jobs", func() bool { return ran() >= 100 })
			// Jobs keep arriving, so claims keep running from the floors.
			trickle, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-trickle:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if err := q.enqueue(ctx, pool, 1, time.Now()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			defer func() { close(trickle); <-done }()
			if err := q.enqueue(ctx, pool, 1, time.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			enqueued := time.Now()
			old := queryInt(t, pool, fmt.Sprintf(`SELECT id FROM "skipjack".%q WHERE run_at < now() - interval '30 minutes'`, q.name))
			// One sweep per poll interval; the bound leaves room for a
			// loaded machine.
			const bound = 10 * poll
			waitFor(t, bound, "the job enqueued below the floors", func() bool {
				mu.Lock()
				defer mu.Unlock()
				_, ok := ranAt[old]
				return ok
			})
			mu.Lock()
			took := ranAt[old].Sub(enqueued)
			mu.Unlock()
			t.Logf("the job due an hour ago ran %v after it was enqueued, %d other jobs ran meanwhile", took.Round(time.Millisecond), ran()-101)
		})
	}
}

// TestPinnedHorizonSpacesShortClaims checks that while sweeps show a pinned
// horizon, a worker whose claims are slow, as on a server at its CPU's
// edge, sends a claim at most every 20 ms (pinnedClaimGap) rather than one
// per notified enqueue: under the pin every floored claim walks the dead
// entries of the last pinnedSlack of claimed jobs, however few jobs it
// takes. The horizon is pinned, and 100,000 jobs made pending and then
// completed leave their dead entries in the claim index, as under a real
// pin. So that the durations do not depend on the machine's speed (on a
// fast one a sweep of those entries took under 20 ms), a trigger makes
// every sweep (Claim) last 25 ms more, so that it shows a pinned horizon,
// and every floored claim (ClaimFrom) 6 ms more, so that claimGapShare
// times its duration is past pinnedClaimGap. Then 4 producers enqueue one
// job each every 10 ms for 2 s, each enqueue notifying the worker, which
// is at WorkerConfig{}. Without the gap, the worker claimed each job or
// two as it came: 246 claims in the 2 s.
func TestPinnedHorizonSpacesShortClaims(t *testing.T) {
	t.Parallel()
	pool := newQueues(t, 20)
	ctx := context.Background()
	pinHorizon(t, pool)
	for _, sql := range []string{
		`INSERT INTO "skipjack"."demo" ("payload") SELECT '{}' FROM generate_series(1, 100000)`,
		`UPDATE "skipjack"."demo" SET "state" = 'completed', "finished_at" = now() WHERE "state" = 'pending'`,
		`CREATE FUNCTION "skipjack"."slow_claims"() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF current_query() LIKE '-- name: ClaimFrom %' THEN
				PERFORM pg_sleep(0.006);
			ELSIF current_query() LIKE '-- name: Claim %' THEN
				PERFORM pg_sleep(0.025);
			END IF;
			RETURN NULL;
		END $$`,
		`CREATE TRIGGER "slow_claims" AFTER UPDATE ON "skipjack"."demo"
			FOR EACH STATEMENT EXECUTE FUNCTION "skipjack"."slow_claims"()`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	claims := &claimRecord{}
	var ran atomic.Int64
	start(t, demo.NewWorker(pool, func(context.Context, *demo.Job) error {
		ran.Add(1)
		return nil
	}, skipjack.WorkerConfig{Hooks: claims, Logger: quietLogger(t)}))
	// A sweep claims at most one job; the worker's other claims may take
	// all its free capacity, far more.
	waitFor(t, time.Minute, "a sweep of 20 ms or more", func() bool {
		return claims.count(func(c recordedClaim) bool { return c.Limit == 1 && c.Took >= 20*time.Millisecond }) > 0
	})
	const producers, every, lasting = 4, 10 * time.Millisecond, 2 * time.Second
	from := time.Now()
	var wg sync.WaitGroup
	var enqueued atomic.Int64
	for range producers {
		wg.Go(func() {
			for time.Since(from) < lasting {
				if _, err := demo.Enqueue(ctx, pool, demo.Payload{}); err != nil {
					t.Error(err)
					return
				}
				enqueued.Add(1)
				time.Sleep(every)
			}
		})
	}
	wg.Wait()
	to := time.Now()
	waitFor(t, time.Minute, "the enqueued jobs to run", func() bool { return ran.Load() == enqueued.Load() })
	sent := claims.count(func(c recordedClaim) bool { return c.Limit > 1 && !c.sent.Before(from) && c.sent.Before(to) })
	most := int(to.Sub(from)/(20*time.Millisecond)) + 2
	t.Logf("%d jobs enqueued in %v, %d claims sent meanwhile (at most %d)", enqueued.Load(), to.Sub(from).Round(time.Millisecond), sent, most)
	if sent > most {
		t.Errorf("with the horizon pinned, the worker sent %d claims in %v, want at most %d (one per 20 ms)", sent, to.Sub(from).Round(time.Millisecond), most)
	}
}

// claimRecord is a ClaimHook that keeps every claim it is told of.
type claimRecord struct {
	mu     sync.Mutex
	claims []recordedClaim
}

// recordedClaim is a claim statement and when it was sent.
type recordedClaim struct {
	skipjack.ClaimInfo
	sent time.Time
}

// ClaimDone records c.
func (l *claimRecord) ClaimDone(c skipjack.ClaimInfo) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims = append(l.claims, recordedClaim{ClaimInfo: c, sent: now.Add(-c.Took)})
}

// count returns how many of the claims match.
func (l *claimRecord) count(match func(recordedClaim) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.claims {
		if match(c) {
			n++
		}
	}
	return n
}
