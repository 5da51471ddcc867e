package skipjack

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The states of a job row.
const (
	// StatePending is a job waiting for its run_at (due or scheduled).
	StatePending = "pending"
	// StateRunning is a job claimed by a worker under a lease.
	StateRunning = "running"
	// StateCompleted is a retained completed job.
	StateCompleted = "completed"
	// StateFailed is a job that used up its attempts, failed permanently or
	// was cancelled.
	StateFailed = "failed"
)

// ErrNotFound is returned by a queue's Get when no job has the given id.
var ErrNotFound = errors.New("skipjack: job not found")

// ErrCancelled is the cause of a running handler's context when an operator
// cancels its job (a queue's Cancel). The job ends failed and is not retried.
var ErrCancelled = errors.New("skipjack: job cancelled")

// ErrDuplicate is returned (wrapped) by Enqueue of a queue declared with
// unique: when a job with the same unique key already exists in one of the
// unique states. Enqueue then also returns the existing job's id.
var ErrDuplicate = errors.New("skipjack: duplicate job")

// Record is one job row as the admin functions (Get, List) return it.
type Record[T any] struct {
	// ID is the job's primary key in its queue table.
	ID int64 `json:"id"`
	// State is pending, running, completed or failed.
	State string `json:"state"`
	// Attempt is the number of attempts made so far (the running one
	// included).
	Attempt int `json:"attempt"`
	// MaxAttempts is the attempt after which a failing job is marked failed.
	MaxAttempts int `json:"max_attempts"`
	// Priority is the job's priority, 0 (first) to 9 (last).
	Priority int `json:"priority"`
	// RunAt is when the job becomes (or became) runnable.
	RunAt time.Time `json:"run_at"`
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when the job completed or failed, or nil.
	FinishedAt *time.Time `json:"finished_at"`
	// LeaseExpiresAt is when a running job's lease lapses, or nil.
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
	// Worker identifies the worker that claimed the job last, or "".
	Worker string `json:"worker"`
	// Rescues counts how often a lapsed lease of this job was rescued.
	Rescues int `json:"rescues"`
	// Errors holds the most recent errors of the job's attempts, oldest
	// first.
	Errors []AttemptError `json:"errors"`
	// Payload is the job's payload.
	Payload T `json:"payload"`
}

// ListParams selects a page of jobs for a queue's List, in id order.
type ListParams struct {
	// State keeps only jobs in this state; "" lists every state.
	State string
	// AfterID starts the page after this id (keyset pagination: pass the
	// last id of the previous page); 0 starts at the beginning.
	AfterID int64
	// Limit caps the page size. Default 100, at most 1000.
	Limit int
	// UntilID, when not 0, stops the page at this id: with AfterID it
	// bounds the rows a filtered page reads to a range of the primary key.
	UntilID int64
	// BeforeID, when not 0, keeps only jobs with ids below it: the keyset
	// of QueueBrowser.ListNewest (pass the last id of the previous, newer
	// page). List honours it too.
	BeforeID int64
	// Payload, when set, is the text of a JSON object that keeps only jobs
	// whose payload contains it (jsonb @>): {"customer": 42} finds the
	// jobs of customer 42. (Text rather than json.RawMessage keeps
	// ListParams comparable.)
	Payload string
	// ErrorGroup, when set, keeps only jobs whose last error normalises to
	// it (FailureGroup.Error).
	ErrorGroup string
}

// QueueInsights is what a QueueAdmin may also implement for the history
// and diagnosis views of tools: the dashboard's charts, failure groups and
// periodic schedules. The Admin of every generated queue package and the
// skipjack CLI's implement it; tools check for it at run time (a type
// assertion) and leave those views out for a QueueAdmin without it, so
// QueueAdmin itself stays small enough to implement by hand.
type QueueInsights interface {
	// Activity returns what the queue's workers recorded per minute since
	// the given time, in minute order; minutes without a finished job are
	// left out. Records are kept for about a day.
	Activity(ctx context.Context, since time.Time) ([]ActivityMinute, error)
	// FailureGroups groups the queue's FailureGroupsScan most recently
	// failed jobs by their normalised last error and returns up to limit
	// groups, largest first.
	FailureGroups(ctx context.Context, limit int) ([]FailureGroup, error)
	// Schedules describes the queue's periodic jobs with their last and
	// next slots.
	Schedules(ctx context.Context) ([]ScheduleInfo, error)
}

// QueueAdmin is the untyped operations view of one queue, with payloads as
// raw JSON: what tools such as the dashboard and the skipjack jobs command
// work with. Every generated queue package returns one from its Admin
// function, bound to a database handle.
type QueueAdmin interface {
	// Name is the queue's name as declared in skipjack.yaml.
	Name() string
	// Stats counts the queue's jobs by state.
	Stats(ctx context.Context) (Stats, error)
	// Finished counts the retained jobs that completed and failed since the
	// given time. Queues that delete completed jobs at ack report 0
	// completed.
	Finished(ctx context.Context, since time.Time) (completed, failed int64, err error)
	// Get returns one job, or an error matching ErrNotFound.
	Get(ctx context.Context, id int64) (*Record[json.RawMessage], error)
	// List returns a page of jobs in id order.
	List(ctx context.Context, p ListParams) ([]*Record[json.RawMessage], error)
	// Retry makes failed or scheduled jobs pending now and returns how many
	// changed.
	Retry(ctx context.Context, ids ...int64) (int64, error)
	// Cancel fails pending jobs with "cancelled" and asks the workers of
	// running jobs to cancel their handlers (with cause ErrCancelled);
	// it returns how many jobs it changed.
	Cancel(ctx context.Context, ids ...int64) (int64, error)
	// Pause stops every process from claiming the queue's jobs until
	// Resume: they stay pending, enqueueing still works and jobs already
	// claimed run on. Stats reports it.
	Pause(ctx context.Context) error
	// Resume lets workers claim the queue's jobs again.
	Resume(ctx context.Context) error
}

// QueueBrowser is what a QueueAdmin may also implement for browsing a
// large queue: job lists newest first, counts under a filter, and
// deleting jobs. The Admin of every generated queue package and the
// skipjack CLI's implement it; tools check for it at run time, as for
// QueueInsights.
type QueueBrowser interface {
	// ListNewest returns a page of jobs newest (highest id) first: ids
	// above p.AfterID, below p.BeforeID (when not 0) and up to p.UntilID
	// (when not 0), with List's State, Payload and ErrorGroup filters and
	// Limit. Keyset pagination both ways: the next older page is
	// BeforeID = the last id of this one; the next newer page is List
	// with AfterID = the first id of this one, reversed.
	ListNewest(ctx context.Context, p ListParams) ([]*Record[json.RawMessage], error)
	// CountMatching counts by state the jobs that p.Payload and
	// p.ErrorGroup select (its other fields are ignored), among the
	// queue's MatchCountScan newest jobs.
	CountMatching(ctx context.Context, p ListParams) (MatchCounts, error)
	// Delete deletes the jobs among ids that are not running and returns
	// how many it deleted. A running job belongs to its worker until its
	// attempt ends: cancel it, then delete it.
	Delete(ctx context.Context, ids ...int64) (int64, error)
}

// MatchCountScan is how many of a queue's newest jobs CountMatching reads
// at most, so that counting under a filter costs a bounded request however
// large the queue's history.
const MatchCountScan = 100_000

// MatchCounts counts the jobs a filter selects, by state, as Stats does
// for the whole queue.
type MatchCounts struct {
	// Pending, Scheduled, Running, Completed and Failed count the selected
	// jobs as the Stats fields of the same names count all jobs.
	Pending, Scheduled, Running, Completed, Failed int64
	// Scanned is how many of the queue's newest jobs were read.
	Scanned int64
	// Partial reports that the queue holds more jobs than were read
	// (Scanned reached MatchCountScan): the counts are then lower bounds,
	// exact for the newest MatchCountScan jobs.
	Partial bool
}

// QueueLimiter is what a QueueAdmin may also implement to describe its
// queue's flow control (limits: and serial: in skipjack.yaml) and how much
// of it is in use now. The Admin of every generated queue package and the
// skipjack CLI's implement it; tools check for it at run time.
type QueueLimiter interface {
	// Limits returns the queue's declared limits and their use now.
	Limits(ctx context.Context) (Limits, error)
}

// Limits is a queue's flow control as declared, and its use now.
type Limits struct {
	// Concurrency caps the jobs claimed at once in all processes
	// (limits.concurrency); 0 means no cap.
	Concurrency int `json:"concurrency"`
	// RateCount and RatePer cap the jobs started in any window of RatePer
	// in all processes (limits.rate); RateCount 0 means no cap.
	RateCount int           `json:"rate_count"`
	RatePer   time.Duration `json:"rate_per"`
	// Serial reports whether jobs with equal serial keys run one at a time
	// (serial.by); SerialBy names the key's fields when the admin knows
	// them.
	Serial   bool     `json:"serial"`
	SerialBy []string `json:"serial_by,omitempty"`
	// PerKeyBy and PerKeyConcurrency are limits.per_key: at most
	// PerKeyConcurrency claimed jobs per key made of the payload fields
	// PerKeyBy, in all processes; PerKeyConcurrency 0 means no cap.
	PerKeyBy          []string `json:"per_key_by,omitempty"`
	PerKeyConcurrency int      `json:"per_key_concurrency"`
	// Claimed counts the jobs claimed now (running or prefetched) in all
	// processes: the slots of Concurrency in use.
	Claimed int64 `json:"claimed"`
	// RateWait is how long until the rate window has room for another
	// start; 0 when it has room now or there is no rate cap.
	RateWait time.Duration `json:"rate_wait"`
}
