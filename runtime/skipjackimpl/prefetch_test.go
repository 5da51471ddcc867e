package skipjackimpl

import (
	"testing"
	"time"
)

// TestPrefetchesFree checks which limited queues prefetch while their
// limits do not bind: not a rate-limited one, whose jobs must start when
// claimed, and not one whose concurrency limit a worker's prefetch would
// be a large share of.
func TestPrefetchesFree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		spec        QueueSpec
		concurrency int
		want        bool
	}{
		{"no limits (prefetches as an unlimited queue, not through this)", QueueSpec{}, 100, false},
		{"serial only (not limited)", QueueSpec{Serial: true}, 100, false},
		{"concurrency far above the worker's", QueueSpec{LimitConcurrency: 100000}, 2000, true},
		{"concurrency at 8x the worker's", QueueSpec{LimitConcurrency: 800}, 100, true},
		{"concurrency below 8x the worker's", QueueSpec{LimitConcurrency: 799}, 100, false},
		{"concurrency below the worker's", QueueSpec{LimitConcurrency: 3}, 10, false},
		{"per-key only", QueueSpec{PerKeyConcurrency: 1}, 100, true},
		{"per-key with a small concurrency limit", QueueSpec{PerKeyConcurrency: 1, LimitConcurrency: 50}, 100, false},
		{"rate", QueueSpec{RateCount: 10, RatePer: time.Second}, 100, false},
		{"rate and a large concurrency limit", QueueSpec{RateCount: 10, RatePer: time.Second, LimitConcurrency: 100000}, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := prefetchesFree(tt.spec, tt.concurrency); got != tt.want {
				t.Errorf("prefetchesFree(%+v, %d) = %v, want %v", tt.spec, tt.concurrency, got, tt.want)
			}
		})
	}
}
