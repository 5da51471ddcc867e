package skipjack

import (
	"time"

	"github.com/skipjack-dev/skipjack/runtime/internal/opts"
)

// EnqueueOption adjusts one Enqueue, EnqueueMany or EnqueueAll call. Create
// options with RunAt, Delay, Priority and MaxAttempts.
type EnqueueOption func(*opts.Enqueue)

// RunAt schedules the job to run no earlier than t. It is the only option
// that carries the application's clock; prefer Delay when clocks may differ.
func RunAt(t time.Time) EnqueueOption {
	return func(o *opts.Enqueue) { o.RunAt = &t; o.Delay = 0 }
}

// Delay schedules the job to run d after the database's current time.
func Delay(d time.Duration) EnqueueOption {
	return func(o *opts.Enqueue) { o.Delay = d; o.RunAt = nil }
}

// Priority sets the job's priority from 0 (runs first) to 9 (runs last). It
// is only accepted by queues declared with priority: true.
func Priority(p int) EnqueueOption {
	return func(o *opts.Enqueue) { o.Priority = p; o.HasPriority = true }
}

// MaxAttempts sets how many attempts the job gets before it fails for good,
// overriding the queue's max_attempts. n must be at least 1; a smaller n
// makes the enqueue return an error.
func MaxAttempts(n int) EnqueueOption {
	return func(o *opts.Enqueue) { o.MaxAttempts = n; o.HasMaxAttempts = true }
}
