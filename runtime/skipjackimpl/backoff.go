package skipjackimpl

import (
	"math/rand/v2"
	"time"
)

// retryDelay returns how long a job waits before attempt+1 after attempt
// failed: exponential from min (doubling per attempt) capped at max, with
// "equal jitter" (a uniformly random point in the upper half of the
// exponential delay), and never below min. Equal jitter keeps retries
// spread out while still growing with every attempt.
func retryDelay(attempt int, min, max time.Duration) time.Duration {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	d := min
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	j := half + rand.N(half+1)
	if j < min {
		j = min
	}
	return j
}

// loopBackoff paces a background loop (claim, flush, heartbeat, listener)
// after database errors: exponential from 100ms to a cap, with full jitter,
// so that a database that is down is retried neither in a tight loop nor
// by every worker at the same instant.
type loopBackoff struct {
	failures int
	max      time.Duration
}

// next records a failure and returns how long to wait before trying again.
func (b *loopBackoff) next() time.Duration {
	b.failures++
	max := b.max
	if max <= 0 {
		max = 5 * time.Second
	}
	d := 100 * time.Millisecond
	for i := 1; i < b.failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// reset records a success.
func (b *loopBackoff) reset() { b.failures = 0 }

// jitter returns d scaled by a random factor in [0.8, 1.2), so that
// periodic work of many workers does not run in lockstep.
func jitter(d time.Duration) time.Duration {
	return d*4/5 + rand.N(d*2/5+1)
}
