package skipjackimpl

import (
	"context"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// QueueSpec describes one queue to the runtime. Generated packages build it
// from the YAML; applications do not need to.
type QueueSpec struct {
	// Name is the queue's name as declared in the YAML (send_email).
	Name string
	// Channel is the NOTIFY channel the queue's insert trigger signals, or ""
	// when the queue was declared with notify: false (poll only).
	Channel string
	// MaxAttempts is the queue's default max_attempts.
	MaxAttempts int
	// BackoffMin and BackoffMax bound the exponential retry delay.
	BackoffMin, BackoffMax time.Duration
	// Timeout is the handler's deadline per attempt.
	Timeout time.Duration
	// Lease is how long a claim lasts without a heartbeat.
	Lease time.Duration
	// Priority reports whether per-job priority is enabled.
	Priority bool
	// RetainCompleted is how long completed jobs are kept; 0 deletes at ack.
	RetainCompleted time.Duration
	// RetainFailed is how long failed jobs are kept; 0 keeps them forever.
	RetainFailed time.Duration
	// Unique reports whether the queue has a unique key.
	Unique bool
	// UniqueKeys and UniqueStates are the payload fields of the queue's
	// unique key and the states in which it holds, when the key is made of
	// fields: a List filtered by payload values for all of them, in one of
	// those states, reads the unique index instead of the table.
	UniqueKeys, UniqueStates []string
	// MaxPayloadBytes caps the encoded payload of one job; 0 means no cap.
	MaxPayloadBytes int
	// Schedules are the queue's periodic jobs.
	Schedules []Schedule
	// Serial reports whether jobs with equal serial keys run one at a time.
	Serial bool
	// LimitConcurrency caps the queue's claimed jobs in all processes
	// together; 0 means no cap.
	LimitConcurrency int
	// RateCount caps the jobs claimed in any window of RatePer in all
	// processes together; 0 means no cap.
	RateCount int
	RatePer   time.Duration
	// Workflow names the tables of a queue that workflows use; nil for
	// every other queue, whose claims and acks do nothing more.
	Workflow *WorkflowTables
	// PerKeyConcurrency caps the claimed jobs of each key (limits.per_key)
	// in all processes together; 0 means no cap. PerKeyBy are the payload
	// fields that make up the key.
	PerKeyConcurrency int
	PerKeyBy          []string
}

// flow returns what the spec declares of the queue's flow control.
func (s QueueSpec) flow() skipjack.Limits {
	return skipjack.Limits{
		Concurrency: s.LimitConcurrency, RateCount: s.RateCount, RatePer: s.RatePer,
		PerKeyBy: s.PerKeyBy, PerKeyConcurrency: s.PerKeyConcurrency, Serial: s.Serial,
	}
}

// limited reports whether the queue's claims take turns under Admit's lock
// and count against a limit.
func (s QueueSpec) limited() bool {
	return s.LimitConcurrency > 0 || s.RateCount > 0 || s.PerKeyConcurrency > 0
}

// settlesFree reports whether a settled job frees room that the queue's
// claims wait for: a slot of the concurrency limit or of its key's per-key
// limit, or its serial key. (A rate limit counts claims, which settling
// does not undo.)
func (s QueueSpec) settlesFree() bool {
	return s.LimitConcurrency > 0 || s.PerKeyConcurrency > 0 || s.Serial
}

// claimedShape is the shape of ClaimRow, an unnamed struct type so the
// constraint can name it with ~.
type claimedShape = struct {
	ID          int64
	Attempt     int32
	Claim       int32
	MaxAttempts int32
	Priority    int16
	Payload     []byte
	RunAt       time.Time
	CreatedAt   time.Time
	Rescues     int32
	Errors      []byte
	Trace       []byte
}

// ClaimedRow is a job row as the claim statement returns it, before its
// payload is decoded.
type ClaimedRow claimedShape

// Action says what a resolution does with a job that did not complete. It
// is the database's side of an attempt's end; skipjack.Outcome is what
// hooks are told of it.
type Action string

// The actions of Store.Resolve.
const (
	// ActionRetry makes the job pending again after Delay, or failed when
	// its attempts are used up.
	ActionRetry Action = "retry"
	// ActionFail marks the job failed now.
	ActionFail Action = "fail"
	// ActionSnooze makes the job pending again after Delay without
	// counting the attempt.
	ActionSnooze Action = "snooze"
	// ActionRelease makes the job pending again at once without counting
	// the attempt or resetting its rescues: a job given back before its
	// handler started, or interrupted by shutdown or by lease doubt.
	ActionRelease Action = "release"
)

// Resolution is the result of one attempt that did not complete.
type Resolution struct {
	ID      int64
	Claim   int32
	Action  Action
	Delay   time.Duration
	Message string
}

// store is the SQL the runtime runs against one queue's table. Every
// generated queue package implements it on top of the sqlc code generated
// for that queue; all methods are single autocommit statements.
//
// Every method that writes to claimed jobs matches each job's id and claim
// token while the job is running, so a writer whose lease was lost never
// touches a newer attempt; batched writes lock rows in id order.
type store interface {
	// Claim marks up to limit due pending jobs running under a lease
	// (FOR NO KEY UPDATE SKIP LOCKED) and returns them appended to dst,
	// whose spare capacity it reuses.
	Claim(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string) ([]ClaimedRow, error)
	// Complete acknowledges completed jobs (deleting them or marking them
	// completed, per the queue's retention) and returns the ids it matched.
	// It counts them in the schema's counts table, adding waits (a
	// histogram over skipjack.WaitBounds of how long the jobs waited from
	// run_at until their handlers started) to the row of this worker and
	// minute, and returns the database's clock when it matched any job.
	Complete(ctx context.Context, ids []int64, claims []int32, waits []int64) (matched []int64, dbNow time.Time, err error)
	// Resolve applies retries, failures and snoozes and returns the ids it
	// matched, counting the failures and retries in the counts table.
	Resolve(ctx context.Context, rs []Resolution) ([]int64, error)
	// Heartbeat extends the leases of the given jobs and returns the ids
	// that are still owned by these claims (a row locked elsewhere counts as
	// owned, unrenewed), and among them those an operator cancelled.
	Heartbeat(ctx context.Context, ids []int64, claims []int32, lease time.Duration) (alive, cancelled []int64, err error)
	// Release makes claimed jobs pending again, restoring their attempt.
	Release(ctx context.Context, ids []int64, claims []int32) (int64, error)
	// Rescue makes up to limit jobs whose lease lapsed and whose worker is
	// not alive pending again (restoring their attempt), or failed after
	// too many rescues, and returns how many it touched.
	Rescue(ctx context.Context, limit int) (int64, error)
	// Live records that the worker with the given id is alive for lease
	// from now, in the schema's workers table.
	Live(ctx context.Context, worker string, lease time.Duration) error
	// Gone marks the workers-table row of a worker that stops cleanly as
	// expired and stopped (and deletes those of workers that expired long
	// ago).
	Gone(ctx context.Context, worker string) error
	// Prune deletes up to limit completed jobs older than completedAge
	// (when completedAge > 0) and failed jobs older than failedAge (when
	// failedAge > 0), returning how many it deleted.
	Prune(ctx context.Context, completedAge, failedAge time.Duration, limit int) (int64, error)
}

// floorStore is the SQL of a queue whose generated queries have ClaimFrom:
// one without a serial key or a per-key limit, generated by a skipjack
// that knows the floored claim.
type floorStore interface {
	// claimsFrom reports whether ClaimFrom may be called.
	claimsFrom() bool
	// ClaimFrom is Claim reading the claim index from floors on (the
	// floors of every priority, see claimFloor); it also returns the
	// statement's clock, or the zero time when it claimed nothing.
	ClaimFrom(ctx context.Context, dst []ClaimedRow, limit int, lease time.Duration, worker string, floors floors) ([]ClaimedRow, time.Time, error)
}

// giveBackStore is the SQL of a queue whose generated queries have
// GiveBack (generated by a skipjack that knows it).
type giveBackStore interface {
	// givesBack reports whether GiveBack may be called.
	givesBack() bool
	// GiveBack makes pending again (restoring the attempt), or failed
	// "cancelled" when an operator cancelled them, up to limit jobs
	// running under worker whose leases lapsed and whose ids are not in
	// held: the jobs of a claim the server committed after the worker's
	// client gave up on it. It returns how many it touched.
	GiveBack(ctx context.Context, worker string, held []int64, limit int) (int64, error)
}

// limitStore is the SQL of a queue with limits or a serial key, whose
// Claim runs after Admit in one READ COMMITTED transaction.
type limitStore interface {
	store
	// Admit prepares the claim's transaction: it takes the lock under
	// which a limited queue's claims take turns, and steers the planner
	// to the claim's index scans, until the transaction ends; and it has
	// the server end the session should its client fall silent inside the
	// transaction, or leave the claim's rows unread, for longer than
	// client (see clientStallLimit).
	Admit(ctx context.Context, client time.Duration) error
	// Headroom says why a claim came back short.
	Headroom(ctx context.Context) (headroom, error)
}
