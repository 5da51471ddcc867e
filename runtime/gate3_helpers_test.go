package skipjack_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/capped"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/keyed"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/paced"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/tenanted"
)

// The gate3_*_test.go files pin the promises that issue 46's held-out
// mutation audit found unheld: each test decides by a result (jobs claimed
// or not, a wake-up that happened or not) and never by a sleep that load
// could stretch. Tests that need a wake-up give their workers a poll
// interval of an hour: only the wake-up under test can then start the job
// within the test's deadline.

// neverPoll is the PollInterval of workers whose claims must come from a
// wake-up: no poll tick falls within a test.
const neverPoll = time.Hour

// claimClock records when each claim statement of a worker started and
// how many jobs it took (a ClaimHook).
type claimClock struct {
	mu     sync.Mutex
	starts []time.Time
	jobs   int
	signal chan struct{}
}

func newClaimClock() *claimClock { return &claimClock{signal: make(chan struct{}, 1)} }

func (c *claimClock) ClaimDone(ci skipjack.ClaimInfo) {
	now := time.Now()
	c.mu.Lock()
	c.starts = append(c.starts, now.Add(-ci.Took))
	c.jobs += ci.Jobs
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// since returns how many claim statements started after t.
func (c *claimClock) since(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.starts {
		if s.After(t) {
			n++
		}
	}
	return n
}

// count returns how many claim statements ran.
func (c *claimClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.starts)
}

// jobCount returns how many jobs the claim statements took.
func (c *claimClock) jobCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs
}

// variant is one kind of claim the generator renders (unlimited,
// limits.concurrency, limits.rate, serial.by, limits.per_key), seen through
// its test queue's generated package.
type variant struct {
	name  string
	table string
	// enqueue inserts n jobs (of one serial key on keyed, of one tenant on
	// tenanted) with opts.
	enqueue func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error
	// worker returns a worker running handle on each job.
	worker func(pool *pgxpool.Pool, handle func(ctx context.Context, id int64) error, cfg skipjack.WorkerConfig) runner
	pause  func(ctx context.Context, db skipjack.DBTX) error
	resume func(ctx context.Context, db skipjack.DBTX) error
	admin  func(db *pgxpool.Pool) skipjack.QueueAdmin
}

// variants returns the claim variants: demo (unlimited), capped
// (limits.concurrency 3), paced (limits.rate 50 per 1099ms), keyed
// (serial.by account) and tenanted (limits.per_key by tenant, 2 per key).
func variants() []variant {
	return []variant{
		{
			name: "unlimited", table: "demo",
			enqueue: func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error {
				_, err := demo.EnqueueMany(ctx, db, make([]demo.Payload, n), opts...)
				return err
			},
			worker: func(pool *pgxpool.Pool, handle func(context.Context, int64) error, cfg skipjack.WorkerConfig) runner {
				return demo.NewWorker(pool, func(ctx context.Context, j *demo.Job) error { return handle(ctx, j.ID) }, cfg)
			},
			pause: demo.Pause, resume: demo.Resume,
			admin: func(db *pgxpool.Pool) skipjack.QueueAdmin { return demo.Admin(db) },
		},
		{
			name: "concurrency", table: "capped",
			enqueue: func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error {
				_, err := capped.EnqueueMany(ctx, db, make([]capped.Payload, n), opts...)
				return err
			},
			worker: func(pool *pgxpool.Pool, handle func(context.Context, int64) error, cfg skipjack.WorkerConfig) runner {
				return capped.NewWorker(pool, func(ctx context.Context, j *capped.Job) error { return handle(ctx, j.ID) }, cfg)
			},
			pause: capped.Pause, resume: capped.Resume,
			admin: func(db *pgxpool.Pool) skipjack.QueueAdmin { return capped.Admin(db) },
		},
		{
			name: "rate", table: "paced",
			enqueue: func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error {
				_, err := paced.EnqueueMany(ctx, db, make([]paced.Payload, n), opts...)
				return err
			},
			worker: func(pool *pgxpool.Pool, handle func(context.Context, int64) error, cfg skipjack.WorkerConfig) runner {
				return paced.NewWorker(pool, func(ctx context.Context, j *paced.Job) error { return handle(ctx, j.ID) }, cfg)
			},
			pause: paced.Pause, resume: paced.Resume,
			admin: func(db *pgxpool.Pool) skipjack.QueueAdmin { return paced.Admin(db) },
		},
		{
			name: "serial", table: "keyed",
			enqueue: func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error {
				ps := make([]keyed.Payload, n)
				for i := range ps {
					ps[i] = keyed.Payload{Account: 1, N: int64(i)}
				}
				_, err := keyed.EnqueueMany(ctx, db, ps, opts...)
				return err
			},
			worker: func(pool *pgxpool.Pool, handle func(context.Context, int64) error, cfg skipjack.WorkerConfig) runner {
				return keyed.NewWorker(pool, func(ctx context.Context, j *keyed.Job) error { return handle(ctx, j.ID) }, cfg)
			},
			pause: keyed.Pause, resume: keyed.Resume,
			admin: func(db *pgxpool.Pool) skipjack.QueueAdmin { return keyed.Admin(db) },
		},
		{
			name: "per_key", table: "tenanted",
			enqueue: func(ctx context.Context, db *pgxpool.Pool, n int, opts ...skipjack.EnqueueOption) error {
				ps := make([]tenanted.Payload, n)
				for i := range ps {
					ps[i] = tenanted.Payload{Tenant: 1, N: int64(i)}
				}
				_, err := tenanted.EnqueueMany(ctx, db, ps, opts...)
				return err
			},
			worker: func(pool *pgxpool.Pool, handle func(context.Context, int64) error, cfg skipjack.WorkerConfig) runner {
				return tenanted.NewWorker(pool, func(ctx context.Context, j *tenanted.Job) error { return handle(ctx, j.ID) }, cfg)
			},
			pause: tenanted.Pause, resume: tenanted.Resume,
			admin: func(db *pgxpool.Pool) skipjack.QueueAdmin { return tenanted.Admin(db) },
		},
	}
}

// counter counts handler runs.
type counter struct{ n atomic.Int64 }

func (c *counter) handle(context.Context, int64) error {
	c.n.Add(1)
	return nil
}

// wakeUntil waits for cond, notifying table's channel every half second
// meanwhile, as an insert does. A worker subscribes to its queue's channel
// when it starts, but the process's listener runs the LISTEN on its own
// connection a moment later: a notification sent before that is lost,
// and a worker that polls once an hour would never learn of the jobs.
func wakeUntil(t *testing.T, pool *pgxpool.Pool, table, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	next := time.Now()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for %s", what)
		}
		if time.Now().After(next) {
			if _, err := pool.Exec(context.Background(), `SELECT pg_notify($1, '')`, "skipjack."+table); err != nil {
				t.Fatal(err)
			}
			next = time.Now().Add(500 * time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
