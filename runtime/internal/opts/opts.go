// Package opts holds the settings that the public option functions of
// package skipjack fill in and that skipjackimpl reads, so neither package
// exposes them.
package opts

import "time"

// Enqueue is the result of applying skipjack.EnqueueOptions.
type Enqueue struct {
	// RunAt is an absolute time to run at (application clock), or nil.
	RunAt *time.Time
	// Delay is added to the database's now() when RunAt is nil.
	Delay time.Duration
	// Priority is the requested priority; HasPriority says whether one was
	// given.
	Priority    int
	HasPriority bool
	// MaxAttempts overrides the queue's max_attempts when HasMaxAttempts.
	MaxAttempts    int
	HasMaxAttempts bool
}
