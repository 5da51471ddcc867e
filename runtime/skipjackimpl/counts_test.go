package skipjackimpl

import (
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestWaitHistogram checks the waits a flush counts: from each job's
// run_at (database clock) to its handler's start (this process's clock,
// moved onto the database's by the skew the last statement showed), in
// the bucket below the first bound the wait is under; prefetched jobs
// that never started are not counted, nor are jobs CompleteTx
// acknowledged (their acknowledgement counted them in the handler's
// transaction; batched with other jobs' results, they would count twice).
func TestWaitHistogram(t *testing.T) {
	t.Parallel()
	db := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// ahead is how far this process's clock is ahead of the database's.
		ahead  time.Duration
		waited time.Duration
		bucket int
	}{
		{"in step, 3ms", 0, 3 * time.Millisecond, 2},
		{"in step, exactly 1s", 0, time.Second, 10},
		{"clock 40s ahead, 30ms", 40 * time.Second, 30 * time.Millisecond, 5},
		{"clock 2s behind, 700ms", -2 * time.Second, 700 * time.Millisecond, 9},
		{"longer than an hour", 0, 2 * time.Hour, len(skipjack.WaitBounds)},
		{"started before run_at (clock jitter)", 0, -time.Millisecond, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c dbClock
			// A statement sent at local 10:00:00.000, answered 10ms later,
			// whose now() was the database's reading halfway.
			sent := db.Add(tt.ahead).Add(-5 * time.Millisecond)
			c.observe(sent, sent.Add(10*time.Millisecond), db)
			runAt := db.Add(-time.Minute)
			started := &entry[int]{row: ClaimedRow{RunAt: runAt}, startedAt: runAt.Add(tt.waited).Add(tt.ahead)}
			prefetched := &entry[int]{row: ClaimedRow{RunAt: runAt}}
			inTx := &entry[int]{row: ClaimedRow{RunAt: runAt}, startedAt: started.startedAt}
			inTx.txAcked.Store(true)
			h := waitHistogram(&c, []*entry[int]{started, prefetched, inTx})
			want := make([]int64, len(skipjack.WaitBounds)+1)
			want[tt.bucket] = 1
			for i := range want {
				if h[i] != want[i] {
					t.Fatalf("histogram %v, want one wait in bucket %d", h, tt.bucket)
				}
			}
		})
	}
}
