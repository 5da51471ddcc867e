package skipjackimpl

import (
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// dbClock estimates how far this process's wall clock is ahead of the
// database's, from the now() that each acknowledging statement returns, so
// that the waits a worker counts (from run_at, on the database's clock, to
// a handler's start, on this process's) do not include the skew of the two
// clocks. Only the flush loop uses it.
type dbClock struct {
	// skew is this process's clock minus the database's, as of the last
	// statement that returned the database's clock.
	skew time.Duration
}

// observe updates the estimate from a statement sent at sent and answered
// at answered (this process's clock) whose now() was dbNow: the database
// read its clock somewhere in between, most likely in the middle.
func (c *dbClock) observe(sent, answered, dbNow time.Time) {
	if dbNow.IsZero() {
		return
	}
	c.skew = sent.Add(answered.Sub(sent) / 2).Sub(dbNow)
}

// waitHistogram counts, over skipjack.WaitBounds, how long the jobs of es
// waited from their run_at until their handlers started, on the database's
// clock (as far as c knows it). It has len(skipjack.WaitBounds)+1 buckets,
// the counts table's. Jobs CompleteTx acknowledged are left out: their
// acknowledgement was written in the handler's transaction, and the
// batched one that follows it matches nothing once that committed (after
// a rollback, rare, the wait goes uncounted rather than counted twice).
func waitHistogram[T any](c *dbClock, es []*entry[T]) []int64 {
	h := make([]int64, len(skipjack.WaitBounds)+1)
	for _, e := range es {
		if e.startedAt.IsZero() || e.txAcked.Load() {
			continue
		}
		h[waitBucket(e.startedAt.Add(-c.skew).Sub(e.row.RunAt))]++
	}
	return h
}

// waitBucket returns the histogram bucket of wait d: the first bound it
// is below, or the last bucket.
func waitBucket(d time.Duration) int {
	for i, b := range skipjack.WaitBounds {
		if d < b {
			return i
		}
	}
	return len(skipjack.WaitBounds)
}
