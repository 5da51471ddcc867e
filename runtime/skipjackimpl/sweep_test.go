package skipjackimpl

import (
	"context"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// sweepStore is a fakeStore with floors: ClaimFrom takes jobs as Claim
// does, and Claim, which the worker sends only as a sweep, waits until
// release is closed, as a sweep under a pinned horizon walks every dead
// entry of the claim index for up to seconds.
type sweepStore struct {
	*fakeStore
	release   chan struct{}
	sweeping  chan struct{} // closed when the first sweep starts
	sweepOnce sync.Once
}

func (s *sweepStore) claimsFrom() bool { return true }

func (s *sweepStore) ClaimFrom(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string, _ floors) ([]ClaimedRow, time.Time, error) {
	rows, err := s.fakeStore.Claim(ctx, dst, limit, lease, worker)
	return rows, time.Now(), err
}

func (s *sweepStore) Claim(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string) ([]ClaimedRow, error) {
	s.sweepOnce.Do(func() { close(s.sweeping) })
	select {
	case <-ctx.Done():
		return dst, ctx.Err()
	case <-s.release:
	}
	return s.fakeStore.Claim(ctx, dst, limit, lease, worker)
}

// TestCrowdedWorkerClaimsBesideSweep checks that a worker that claims one
// statement at a time, because its last claims show other claimers, still
// claims while a sweep is in flight, with the capacity the sweep does not
// use: jobs enqueued once the sweep is stuck are handled before it
// returns. (A worker assumes company until its first claims show
// otherwise, and the jobs' ids, every other number, keep showing it.)
func TestCrowdedWorkerClaimsBesideSweep(t *testing.T) {
	t.Parallel()
	f := &sweepStore{fakeStore: &fakeStore{}, release: make(chan struct{}), sweeping: make(chan struct{})}
	var handled sync.Map
	w := newWorker(lazyPool(t), QueueSpec{Name: "fake", Lease: 30 * time.Second}, f,
		func(_ context.Context, j *skipjack.Job[struct{}]) error {
			handled.Store(j.ID, true)
			return nil
		}, skipjack.WorkerConfig{PollInterval: 20 * time.Millisecond, Logger: discardLogger()})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		close(f.release)
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-f.sweeping:
	case <-time.After(time.Minute):
		t.Fatal("no sweep started")
	}
	const jobs = 40
	f.mu.Lock()
	for i := range int64(jobs) {
		f.pending = append(f.pending, 2*i+1)
	}
	f.mu.Unlock()
	waitFor(t, "the jobs enqueued during the sweep to be handled", func() bool {
		n := 0
		handled.Range(func(any, any) bool { n++; return true })
		return n == jobs
	})
}
