package skipjack

import (
	"context"
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

// WorkflowAdmin is the operations view of one workflow declared in
// skipjack.yaml: what tools such as the dashboard and the skipjack
// workflows command read workflows with. Every generated workflow package
// returns one from its Admin function, bound to a database handle.
type WorkflowAdmin interface {
	// Name is the workflow's name as declared in skipjack.yaml.
	Name() string
	// Steps are the workflow's declared steps, every step after the steps
	// it runs after.
	Steps() []WorkflowStepInfo
	// Get returns one workflow of this name, or an error matching
	// ErrWorkflowNotFound (also for a workflow of another name).
	Get(ctx context.Context, id int64) (*WorkflowRecord, error)
	// List returns a page of the workflows of this name, newest first
	// (keyset pagination on the id, see WorkflowListParams).
	List(ctx context.Context, p WorkflowListParams) ([]WorkflowSummary, error)
	// JobWorkflow returns the id of the workflow of this name whose step
	// is the given job of the given queue, or 0 when the job is no step of
	// such a workflow.
	JobWorkflow(ctx context.Context, queue string, jobID int64) (int64, error)
}

// WorkflowStepInfo is one declared step of a workflow.
type WorkflowStepInfo struct {
	// Name is the step's name and Queue its queue's name in skipjack.yaml.
	Name, Queue string
	// After are the steps it runs after, as declared.
	After []string
}

// WorkflowListParams selects a page of workflows for WorkflowAdmin.List.
type WorkflowListParams struct {
	// State keeps only workflows in this state (WorkflowRunning,
	// WorkflowCompleted or WorkflowFailed); "" lists every state.
	State string
	// BeforeID, when not 0, keeps only workflows with ids below it (the
	// next older page starts below the last id of this one).
	BeforeID int64
	// AfterID, when not 0, keeps only workflows with ids above it, and
	// returns the oldest of them first (the next newer page: reverse it).
	AfterID int64
	// Limit caps the page size. Default 100, at most 1000.
	Limit int
}

// WorkflowSummary is one workflow as WorkflowAdmin.List returns it.
type WorkflowSummary struct {
	// ID, Name and CreatedAt are as in WorkflowRecord.
	ID        int64
	Name      string
	CreatedAt time.Time
	// State is WorkflowRunning, WorkflowCompleted or WorkflowFailed.
	State string
	// Steps counts the workflow's steps, Finished those that completed
	// or failed, Failed those that failed.
	Steps, Finished, Failed int
}
