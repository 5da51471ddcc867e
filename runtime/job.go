package skipjack

import (
	"time"

	"github.com/skipjack-dev/skipjack/runtime/internal/link"
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
	// Trace is the trace context of the Enqueue call that inserted the job,
	// as the process's TracePropagator (see SetTracePropagator) injected
	// it; nil when the enqueuer had none, or for jobs inserted by SQL or by
	// a schedule. A tracing hook reads it to make the attempt part of the
	// enqueuer's trace.
	Trace map[string]string

	// WorkflowID is the id of the workflow this job is a step of, or 0
	// for a job outside any workflow.
	WorkflowID int64

	// Claim is this attempt's fencing token: the row's claim counter as this
	// attempt's claim set it. Every write the worker makes for the attempt,
	// and CompleteTx, match it, so an attempt whose lease was lost can never
	// settle a newer attempt of the same job.
	Claim int32

	// output is what the handler recorded with the generated SetOutput,
	// encoded; nil when it recorded none.
	output []byte
}

// setOutput and takeOutput are what link.SetJobOutput and link.JobOutput
// call.
func (j *Job[T]) setOutput(b []byte) { j.output = b }
func (j *Job[T]) jobOutput() []byte  { return j.output }

// outputHolder is a Job of any payload type.
type outputHolder interface {
	setOutput(b []byte)
	jobOutput() []byte
}

func init() {
	link.SetJobOutput = func(job any, b []byte) { job.(outputHolder).setOutput(b) }
	link.JobOutput = func(job any) []byte { return job.(outputHolder).jobOutput() }
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
