package skipjackimpl

import (
	"testing"
	"time"
)

// TestLoopBackoffBounds checks the wait of a worker loop after each
// consecutive failure (a database that is down) against its window: the
// upper half of 100ms*2^(failures-1), capped at max (5s when max is 0).
// Gremlins found every mutant of loopBackoff.next alive before this test.
func TestLoopBackoffBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		max, capped time.Duration
	}{
		{0, 5 * time.Second},
		{time.Second, time.Second},
		{30 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		b := &loopBackoff{max: tt.max}
		for failures := 1; failures <= 12; failures++ {
			exp := min(100*time.Millisecond<<(failures-1), tt.capped)
			lo, hi := exp/2, exp
			for i := range 100 {
				if i > 0 {
					b.failures-- // stay at this number of failures
				}
				if d := b.next(); d < lo || d > hi {
					t.Fatalf("max %v, failure %d: wait %v, want within [%v, %v]", tt.max, failures, d, lo, hi)
				}
			}
		}
	}
}

// TestJitterBounds checks that jitter(d) stays within 20% of d.
func TestJitterBounds(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{time.Millisecond, time.Second, time.Minute} {
		for range 200 {
			if j := jitter(d); j < d*4/5 || j > d*6/5 {
				t.Fatalf("jitter(%v) = %v, want within [%v, %v]", d, j, d*4/5, d*6/5)
			}
		}
	}
}
