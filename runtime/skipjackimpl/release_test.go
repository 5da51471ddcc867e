package skipjackimpl

import (
	"context"
	"slices"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestFailedReleaseKeepsJobsHeld checks that prefetched jobs whose release
// failed (the database refused connections, say) stay held, so that
// heartbeats keep renewing their leases, and that a later heartbeat's
// retry gives them back. Before, they were forgotten: they stayed
// running under a worker that kept proving itself alive, which no rescue
// takes jobs from, for as long as the worker lived.
func TestFailedReleaseKeepsJobsHeld(t *testing.T) {
	t.Parallel()
	f := &fakeStore{failReleases: 2}
	w := newWorker(lazyPool(t), QueueSpec{Name: "fake", Lease: 3 * time.Second}, f,
		func(context.Context, *skipjack.Job[struct{}]) error { return nil },
		skipjack.WorkerConfig{Concurrency: 1, Logger: discardLogger()})
	r := newRunner(w)
	es := make([]*entry[struct{}], 3)
	r.mu.Lock()
	for i := range es {
		es[i] = &entry[struct{}]{row: ClaimedRow{ID: int64(i + 1), Claim: 1}}
		r.held[es[i].row.ID] = es[i]
	}
	r.mu.Unlock()
	held := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.held)
	}

	steps := []struct {
		name     string
		do       func()
		wantHeld int
	}{
		{"a failed release", func() { r.releaser.release(es) }, 3},
		{"a heartbeat's retry that fails too", r.releaser.retry, 3},
		{"a heartbeat's retry that succeeds", r.releaser.retry, 0},
		{"a heartbeat with nothing left to release", r.releaser.retry, 0},
	}
	for _, st := range steps {
		st.do()
		if got := held(); got != st.wantHeld {
			t.Fatalf("after %s: %d jobs held, want %d", st.name, got, st.wantHeld)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []int64{1, 2, 3}; !slices.Equal(f.released, want) {
		t.Errorf("released %v, want %v", f.released, want)
	}
	if f.releaseCalls != 3 {
		t.Errorf("%d Release statements, want 3 (two failed, then one)", f.releaseCalls)
	}
}
