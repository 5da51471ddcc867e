package skipjack

import (
	"errors"
	"fmt"
	"time"
)

// ErrLeaseLost is returned by CompleteTx when the attempt no longer owns its
// job: its lease lapsed and the job was rescued, or another write already
// settled it. The caller's transaction should roll back.
var ErrLeaseLost = errors.New("skipjack: lease lost: this attempt no longer owns the job")

// SnoozeError is the handler result created by Snooze.
type SnoozeError struct {
	// Duration is how long the job sleeps before it runs again.
	Duration time.Duration
}

// Error implements error.
func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.Duration) }

// Snooze returns a handler result that makes the job run again after d
// without counting the attempt. d is clamped to at least the worker's poll
// interval. The result is found with errors.As, so it may be wrapped.
func Snooze(d time.Duration) error { return &SnoozeError{Duration: d} }

// PermanentError is the handler result created by Permanent.
type PermanentError struct {
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "permanent failure"
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent returns a handler result that fails the job now, without further
// retries. The result is found with errors.As, so it may be wrapped.
func Permanent(err error) error { return &PermanentError{Err: err} }

// ErrPayloadTooLarge is returned (wrapped) by Enqueue and EnqueueMany for
// a payload whose encoding is larger than its queue's max_payload_bytes;
// nothing is inserted.
var ErrPayloadTooLarge = errors.New("payload is larger than the queue's max_payload_bytes")

// ErrNULInPayload is returned (wrapped) by Enqueue and EnqueueMany for a
// payload holding a string with a NUL character, which PostgreSQL's jsonb
// cannot store; nothing is inserted.
var ErrNULInPayload = errors.New("payload contains a NUL character (\\u0000), which jsonb cannot store")
