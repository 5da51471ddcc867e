package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// fakeStore is an in-memory queue table behind the queries interface, so
// the worker's bookkeeping can be tested without a database: the backlog
// limit, re-queued flushes and dropped results of lost leases.
type fakeStore struct {
	mu        sync.Mutex
	pending   []int64
	claims    int // jobs handed out by Claim
	completes [][]int64
	resolves  []Resolution

	failCompletes int           // Complete fails this many times first
	failReleases  int           // Release fails this many times first
	releaseCalls  int           // Release statements run
	released      []int64       // ids Release made pending
	block         chan struct{} // when non-nil, Complete waits for it to close
	completeCall  chan struct{} // signalled on every Complete call
	lostIDs       map[int64]bool
	payload       []byte // what Claim returns as every job's payload; {} when nil
	acked         int    // jobs acknowledged
	discardAcks   bool   // count acknowledgements without recording their ids
	rejectMessage string // Resolve fails as Postgres does for bad data when a message contains it
	resolveCalls  int    // Resolve statements run
	// holdEmptyClaims, when non-nil, keeps every claim of an empty queue
	// in flight until it is closed (or the claim's context ends), as
	// claims are when a burst ends: no claim returns to start handlers
	// for jobs already prefetched. emptyClaimed, when non-nil, is closed
	// when the first such claim starts.
	holdEmptyClaims chan struct{}
	emptyClaimed    chan struct{}
	emptyOnce       sync.Once
	// dsts records, for every Claim call, the capacity of the slice it was
	// given to append to, and whether all of that slice (up to its
	// capacity) was zero: a cleared buffer that holds nothing alive.
	dsts []claimDst
}

// claimDst is what one Claim call was given to append to.
type claimDst struct {
	len, cap int
	cleared  bool
}

func (f *fakeStore) Claim(ctx context.Context, dst []ClaimedRow, limit int, _ time.Duration, _ string) ([]ClaimedRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) == 0 && f.holdEmptyClaims != nil {
		if f.emptyClaimed != nil {
			f.emptyOnce.Do(func() { close(f.emptyClaimed) })
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-f.holdEmptyClaims:
		}
		f.mu.Lock()
	}
	f.dsts = append(f.dsts, claimDst{len: len(dst), cap: cap(dst), cleared: !slices.ContainsFunc(dst[:cap(dst)], func(r ClaimedRow) bool {
		return r.ID != 0 || r.Payload != nil || r.Errors != nil
	})})
	n := min(limit, len(f.pending))
	payload := f.payload
	if payload == nil {
		payload = []byte(`{}`)
	}
	for _, id := range f.pending[:n] {
		dst = append(dst, ClaimedRow{ID: id, Attempt: 1, Claim: 1, MaxAttempts: 3, Payload: payload, Errors: []byte(`[]`)})
	}
	f.pending = f.pending[n:]
	f.claims += n
	return dst, nil
}

func (f *fakeStore) Complete(ctx context.Context, ids []int64, _ []int32, _ []int64) ([]int64, time.Time, error) {
	if f.completeCall != nil {
		select {
		case f.completeCall <- struct{}{}:
		default:
		}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, time.Time{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failCompletes > 0 {
		f.failCompletes--
		return nil, time.Time{}, errors.New("connection reset")
	}
	f.acked += len(ids)
	if !f.discardAcks {
		f.completes = append(f.completes, slices.Clone(ids))
	}
	return ids, time.Now(), nil
}

func (f *fakeStore) Resolve(_ context.Context, rs []Resolution) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolveCalls++
	for _, r := range rs {
		if f.rejectMessage != "" && strings.Contains(r.Message, f.rejectMessage) {
			return nil, &pgconn.PgError{Code: "22021", Message: "invalid byte sequence for encoding \"UTF8\""}
		}
	}
	f.resolves = append(f.resolves, rs...)
	ids := make([]int64, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids, nil
}

func (f *fakeStore) Heartbeat(_ context.Context, ids []int64, _ []int32, _ time.Duration) ([]int64, []int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var alive []int64
	for _, id := range ids {
		if !f.lostIDs[id] {
			alive = append(alive, id)
		}
	}
	return alive, nil, nil
}

// Release records the released ids; it fails while failReleases lasts.
func (f *fakeStore) Release(_ context.Context, ids []int64, _ []int32) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseCalls++
	if f.failReleases > 0 {
		f.failReleases--
		return 0, errors.New("fake: too many clients already")
	}
	f.released = append(f.released, ids...)
	return int64(len(ids)), nil
}

func (f *fakeStore) Live(context.Context, string, time.Duration) error { return nil }
func (f *fakeStore) Gone(context.Context, string) error                { return nil }
func (f *fakeStore) Rescue(context.Context, int) (int64, error)        { return 0, nil }
func (f *fakeStore) Prune(context.Context, time.Duration, time.Duration, int) (int64, error) {
	return 0, nil
}
func (f *fakeStore) enqueue(context.Context, string, *time.Time, time.Duration, int16, *string, int32) (int64, error) {
	return 0, nil
}
func (f *fakeStore) enqueueCopy(context.Context, [][]byte, int16, *time.Time, []byte, int32) (int64, error) {
	return 0, nil
}
func (f *fakeStore) enqueueAll(context.Context, enqueueAllParams) ([]skipjack.EnqueueResult, error) {
	return nil, nil
}
func (f *fakeStore) now(context.Context, time.Duration) (time.Time, error)    { return time.Now(), nil }
func (f *fakeStore) completeOne(context.Context, int64, int32) (int64, error) { return 0, nil }
func (f *fakeStore) stats(context.Context) (skipjack.Stats, error)            { return skipjack.Stats{}, nil }
func (f *fakeStore) countFinished(context.Context, string, time.Time) (int64, error) {
	return 0, nil
}
func (f *fakeStore) get(context.Context, int64) (*skipjack.Record[[]byte], error) { return nil, nil }
func (f *fakeStore) list(context.Context, skipjack.ListParams) ([]*skipjack.Record[[]byte], error) {
	return nil, nil
}
func (f *fakeStore) retry(context.Context, []int64) (int64, error)  { return 0, nil }
func (f *fakeStore) cancel(context.Context, []int64) (int64, error) { return 0, nil }
func (f *fakeStore) failureGroups(context.Context, int) ([]skipjack.FailureGroup, error) {
	return nil, nil
}
func (f *fakeStore) activity(context.Context, time.Time) ([]skipjack.ActivityMinute, error) {
	return nil, nil
}
func (f *fakeStore) pause(context.Context) error  { return nil }
func (f *fakeStore) resume(context.Context) error { return nil }
func (f *fakeStore) unique() uniqueQueries        { return nil }
func (f *fakeStore) slots() slotQueries           { return nil }
func (f *fakeStore) quiet() quietQueries          { return nil }
func (f *fakeStore) browse() browseQueries        { return nil }

func (f *fakeStore) completed() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []int64
	for _, c := range f.completes {
		all = append(all, c...)
	}
	return all
}

// lazyPool returns a pool that never connects: the fake store runs every
// statement, and the queue has no NOTIFY channel.
func lazyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?pool_max_conns=200")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// runFake runs a worker over f until stop returns true (polled on every
// handler call and every 10ms), then cancels it and waits for Run.
func runFake(t *testing.T, f *fakeStore, spec QueueSpec, cfg skipjack.WorkerConfig, handle func(context.Context, *skipjack.Job[struct{}]) error) (cancel func()) {
	t.Helper()
	cfg.PollInterval = 20 * time.Millisecond
	cfg.Logger = discardLogger()
	w := newWorker(lazyPool(t), spec, f, handle, cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return")
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ids(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// TestFailedFlushRequeued checks that acknowledgements whose statement
// failed are written again, so no completed job is left to its lease.
func TestFailedFlushRequeued(t *testing.T) {
	t.Parallel()
	f := &fakeStore{pending: ids(20), failCompletes: 2}
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second}, skipjack.WorkerConfig{Concurrency: 4, BatchSize: 5},
		func(context.Context, *skipjack.Job[struct{}]) error { return nil })
	waitFor(t, "20 acknowledgements", func() bool { return len(f.completed()) >= 20 })
	stop()
	got := f.completed()
	slices.Sort(got)
	if !slices.Equal(got, ids(20)) {
		t.Errorf("acknowledged %v, want each of 1..20 once", got)
	}
}

// TestBacklogLimitPausesClaims checks that claiming pauses while results
// wait to be flushed: with the acknowledgement statement stuck, the worker
// must not claim the whole queue.
func TestBacklogLimitPausesClaims(t *testing.T) {
	t.Parallel()
	f := &fakeStore{pending: ids(1000), block: make(chan struct{}), completeCall: make(chan struct{}, 1)}
	cfg := skipjack.WorkerConfig{Concurrency: 2, BatchSize: 2}
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second}, cfg,
		func(context.Context, *skipjack.Job[struct{}]) error { return nil })
	<-f.completeCall // the first flush is stuck from now on
	// Bound: the backlog limit (2*max(BatchSize, Concurrency)), the batch
	// inside the stuck statement, and what the worker may hold (2*Concurrency).
	bound := 2*max(cfg.BatchSize, cfg.Concurrency) + cfg.BatchSize + 2*cfg.Concurrency
	time.Sleep(300 * time.Millisecond) // an upper bound can only be watched for a while
	f.mu.Lock()
	claimed := f.claims
	f.mu.Unlock()
	close(f.block)
	stop()
	if claimed > bound {
		t.Errorf("claimed %d jobs while acknowledgements were stuck, want at most %d", claimed, bound)
	}
}

// TestLostLeaseResultDropped checks that a job whose lease the heartbeat
// finds lost has its handler cancelled with ErrLeaseLost and its result
// dropped: the worker must not acknowledge a job it no longer owns.
func TestLostLeaseResultDropped(t *testing.T) {
	t.Parallel()
	f := &fakeStore{pending: []int64{7}, lostIDs: map[int64]bool{7: true}}
	cause := make(chan error, 1)
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 1500 * time.Millisecond}, skipjack.WorkerConfig{Concurrency: 1},
		func(ctx context.Context, _ *skipjack.Job[struct{}]) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil // a late success that must be dropped
		})
	select {
	case err := <-cause:
		if !errors.Is(err, skipjack.ErrLeaseLost) {
			t.Errorf("handler cancelled with %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a job with a lost lease was not cancelled")
	}
	stop()
	if got := f.completed(); len(got) != 0 {
		t.Errorf("acknowledged %v after the lease was lost, want nothing", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.resolves) != 0 {
		t.Errorf("resolved %v after the lease was lost, want nothing", f.resolves)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestIdleRunFlushesBurst checks when a run that has nothing left to do
// acknowledges without waiting out AckDelay: at the end of a burst
// (idleFlushMin results or more waiting) it flushes at once, while the few
// results of a trickle still wait to share a commit.
func TestIdleRunFlushesBurst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		jobs    int
		flushed bool // within the test's wait, long before AckDelay
	}{
		{"burst", idleFlushMin + 50, true},
		{"trickle", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The handlers end while a claim of the empty queue is in
			// flight: it reserves capacity but holds no job, so the run
			// is idle.
			f := &fakeStore{pending: ids(tc.jobs), holdEmptyClaims: make(chan struct{}), emptyClaimed: make(chan struct{})}
			var handled sync.WaitGroup
			handled.Add(tc.jobs)
			cfg := skipjack.WorkerConfig{Concurrency: 200, BatchSize: 1000, AckDelay: time.Hour}
			stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second}, cfg,
				func(context.Context, *skipjack.Job[struct{}]) error {
					<-f.emptyClaimed
					handled.Done()
					return nil
				})
			defer stop()
			defer close(f.holdEmptyClaims) // before stop, which waits for claims in flight
			handled.Wait()
			if tc.flushed {
				waitFor(t, "the burst's acknowledgements", func() bool { return len(f.completed()) == tc.jobs })
				return
			}
			time.Sleep(300 * time.Millisecond) // an absence can only be watched for a while
			if got := f.completed(); len(got) != 0 {
				t.Errorf("acknowledged %d jobs of a trickle before AckDelay, want them to wait", len(got))
			}
		})
	}
}

// TestConcurrencyBoundsHandlers checks WorkerConfig.Concurrency: with more
// jobs prefetched than it allows, exactly that many handlers run at once,
// never more, and as handlers return the rest run, each job once, without
// waiting for another claim to return (claims of the emptied queue stay
// in flight until the end).
func TestConcurrencyBoundsHandlers(t *testing.T) {
	t.Parallel()
	for _, concurrency := range []int{1, 7, 50, 500} {
		t.Run(fmt.Sprint(concurrency), func(t *testing.T) {
			t.Parallel()
			jobs := 4 * concurrency
			f := &fakeStore{pending: ids(jobs), holdEmptyClaims: make(chan struct{})}
			var mu sync.Mutex
			running, peak := 0, 0
			var first, full time.Time // when the first handler started, and the last of Concurrency
			release := make(chan struct{})
			stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second}, skipjack.WorkerConfig{Concurrency: concurrency, AckDelay: time.Millisecond},
				func(context.Context, *skipjack.Job[struct{}]) error {
					mu.Lock()
					running++
					peak = max(peak, running)
					if first.IsZero() {
						first = time.Now()
					}
					if running == concurrency && full.IsZero() {
						full = time.Now()
					}
					mu.Unlock()
					<-release
					mu.Lock()
					running--
					mu.Unlock()
					return nil
				})
			defer stop()
			defer close(f.holdEmptyClaims) // before stop, which waits for claims in flight
			now := func() int {
				mu.Lock()
				defer mu.Unlock()
				return running
			}
			waitFor(t, fmt.Sprintf("%d handlers to run", concurrency), func() bool { return now() == concurrency })
			time.Sleep(100 * time.Millisecond) // more could only start meanwhile
			close(release)
			waitFor(t, "every job's acknowledgement", func() bool { return len(f.completed()) == jobs })
			mu.Lock()
			defer mu.Unlock()
			if peak != concurrency {
				t.Errorf("at most %d handlers ran at once, want %d", peak, concurrency)
			}
			// Handlers that block start the next goroutine as they take
			// their jobs: all Concurrency run within moments, not one
			// claim or poll apart (500 handlers one poll apart take
			// minutes). Under 5s: CI at load 6 with -race took 1.7s.
			if ramp := full.Sub(first); ramp > 5*time.Second {
				t.Errorf("%d blocking handlers took %v to start after the first, want under 5s", concurrency, ramp)
			}
			got := f.completed()
			slices.Sort(got)
			if !slices.Equal(got, ids(jobs)) {
				t.Errorf("acknowledged %v, want each of 1..%d once", got, jobs)
			}
		})
	}
}

// TestQuickHandlersKeepFewGoroutines checks that handlers that return at
// once do not get a goroutine per queued job: a claim starts one handler
// goroutine, and a handler starts another only when it takes a job while
// every goroutine is busy, so goroutines grow only as fast as the ones
// started get to run. Starting one per queued job (up to Concurrency) cost
// a goroutine's creation, a wake-up and a run-queue slot per job.
//
// Not parallel: it counts every goroutine of the process.
func TestQuickHandlersKeepFewGoroutines(t *testing.T) {
	const jobs, concurrency = 5_000, 2_000
	f := &fakeStore{pending: ids(jobs), discardAcks: true}
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	var handled atomic.Int64
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second},
		skipjack.WorkerConfig{Concurrency: concurrency, BatchSize: concurrency},
		func(context.Context, *skipjack.Job[struct{}]) error {
			n := int64(runtime.NumGoroutine())
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			handled.Add(1)
			return nil
		})
	waitFor(t, "every job to run", func() bool { return handled.Load() == jobs })
	stop()
	// The worker's own goroutines (fetcher, completer, heartbeats) are a
	// handful, and quick handlers' goroutines grow slowly (12-268 in runs
	// with -race, on a loaded machine too); a goroutine per queued job is
	// 2,000 here.
	if extra := peak.Load() - int64(base); extra > concurrency/2 {
		t.Errorf("up to %d goroutines more than before Run while quick handlers ran %d jobs, want at most %d", extra, jobs, concurrency/2)
	} else {
		t.Logf("at most %d goroutines more than before Run", extra)
	}
}

// TestClaimsReuseClearedBuffers checks that a worker's claims scan their
// rows into slices it keeps from one claim to the next, instead of a new
// slice of thousands of rows per claim, and that a kept slice is cleared
// first, so that it holds no payload of jobs long finished alive.
func TestClaimsReuseClearedBuffers(t *testing.T) {
	t.Parallel()
	const jobs, batch = 3_000, 100
	f := &fakeStore{pending: ids(jobs), discardAcks: true}
	var handled atomic.Int64
	stop := runFake(t, f, QueueSpec{Name: "fake", Lease: 30 * time.Second},
		skipjack.WorkerConfig{Concurrency: batch, BatchSize: batch},
		func(context.Context, *skipjack.Job[struct{}]) error {
			handled.Add(1)
			return nil
		})
	waitFor(t, "every job to run", func() bool { return handled.Load() == jobs })
	stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.dsts) < jobs/batch {
		t.Fatalf("%d claims for %d jobs of at most %d each", len(f.dsts), jobs, batch)
	}
	fresh := 0
	for i, d := range f.dsts {
		if d.len != 0 || !d.cleared {
			t.Errorf("claim %d was given %d rows to append to (%v cleared), want an empty, cleared slice", i+1, d.len, d.cleared)
		}
		if d.cap < batch/2 {
			fresh++
		}
	}
	// A claim that finds no kept slice starts with nothing: at most one
	// per claim in flight. Every other claim takes a slice that an earlier
	// claim of a full batch grew.
	if fresh > maxClaimsInFlight {
		t.Errorf("%d of %d claims were given no slice kept from an earlier claim, want at most %d (one per claim in flight)", fresh, len(f.dsts), maxClaimsInFlight)
	}
}
