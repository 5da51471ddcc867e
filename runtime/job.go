package skipjack

import (
	"sync/atomic"
	"time"
)

// Job is one claimed job of a queue with payload type T, as a handler sees it.
type Job[T any] struct {
	// ID is the job's primary key in its queue table.
	ID int64
	// Attempt is the number of this attempt, starting at 1. Snoozes and
	// rescues of a lost lease do not count as attempts.
	Attempt int
	// MaxAttempts is the attempt after which a failing job is marked failed.
	MaxAttempts int
	// Priority is the job's priority, 0 (first) to 9 (last).
	Priority int
	// Payload is the decoded payload.
	Payload T
	// CreatedAt is when the job was enqueued (database clock).
	CreatedAt time.Time
	// RunAt is when the job became (or was scheduled to become) runnable.
	RunAt time.Time
	// Rescues counts how often a lapsed lease of this job was rescued.
	Rescues int
	// Errors holds the most recent errors of earlier attempts, oldest first.
	Errors []AttemptError

	claim   int32       // fencing token: the claim counter this attempt owns
	txAcked atomic.Bool // set by CompleteTx so the worker does not ack again
}

// AttemptError is one entry of a job's error history.
type AttemptError struct {
	// Attempt is the attempt that failed.
	Attempt int `json:"attempt"`
	// At is when the failure was recorded (database clock).
	At time.Time `json:"at"`
	// Error is the error's message.
	Error string `json:"error"`
	// Worker identifies the worker that ran the attempt.
	Worker string `json:"worker"`
}
