package skipjack

import (
	"errors"
	"time"
)

// ErrWorkflowNotFound is returned by a workflow package's Get, Cancel and
// Outputs when no workflow has the given id.
var ErrWorkflowNotFound = errors.New("skipjack: workflow not found")

// The states of a workflow and of its steps, as WorkflowRecord and
// StepRecord report them.
const (
	// StepWaiting is a step whose upstream steps have not all finished:
	// its job is pending but no worker claims it.
	StepWaiting = "waiting"
	// WorkflowRunning is a workflow with a step not finished yet.
	WorkflowRunning = "running"
	// WorkflowCompleted is a workflow whose steps all completed.
	WorkflowCompleted = "completed"
	// WorkflowFailed is a workflow whose steps all finished, one or more
	// of them failed (or cancelled, with the error "cancelled").
	WorkflowFailed = "failed"
)

// WorkflowRecord is one workflow as a workflow package's Get returns it.
type WorkflowRecord struct {
	// ID is the workflow's id, as Start returned it.
	ID int64
	// Name is the workflow's name in skipjack.yaml.
	Name string
	// State is WorkflowRunning, WorkflowCompleted or WorkflowFailed.
	State string
	// CreatedAt is when the workflow started (database clock).
	CreatedAt time.Time
	// Steps are the workflow's steps by their names in skipjack.yaml.
	Steps map[string]StepRecord
}

// StepRecord is one step of a WorkflowRecord.
type StepRecord struct {
	// Queue is the queue the step's job is in.
	Queue string
	// JobID is the id of the step's job in its queue.
	JobID int64
	// State is StepWaiting, or the job's state: pending, running,
	// completed or failed.
	State string
	// Error is the last error of a failed step: "cancelled" for a step
	// that Cancel cancelled or whose upstream step failed.
	Error string
}
