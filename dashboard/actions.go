package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// action is an operation on one job that an operator confirms first.
type action struct {
	// Name is the action's path segment and form token label.
	Name string
	// Verb, Past and PastMany label buttons and results.
	Verb, Past, PastMany string
	// Explain says on the confirmation page what the action does.
	Explain string
	// applies reports whether the action changes a job in rec's state.
	applies func(rec *skipjack.Record[json.RawMessage], now time.Time) bool
	// do performs the action and returns how many jobs changed.
	do func(ctx context.Context, q skipjack.QueueAdmin, ids ...int64) (int64, error)
	// browser says the action needs a skipjack.QueueBrowser (delete).
	browser bool
	// removes says the action's jobs are gone after it, so it returns to
	// the queue page rather than the job's.
	removes bool
}

// offered reports whether a's button is shown for q's jobs.
func (a action) offered(q skipjack.QueueAdmin) bool {
	if !a.browser {
		return true
	}
	_, ok := q.(skipjack.QueueBrowser)
	return ok
}

// actionOrder is the order of a job page's action buttons.
var actionOrder = []string{"retry", "cancel", "delete"}

// errNoDelete is the error of delete on a queue whose admin cannot delete.
var errNoDelete = errors.New("this queue's admin cannot delete jobs (it is no skipjack.QueueBrowser)")

// actions are the actions by name.
var actions = map[string]action{
	"retry": {
		Name: "retry", Verb: "Retry", Past: "retried: it is pending now", PastMany: "retried",
		Explain: "The job becomes pending with its run time set to now, so the next free worker runs it: a failed job runs again, a scheduled one runs early.",
		applies: func(rec *skipjack.Record[json.RawMessage], now time.Time) bool {
			return rec.State == skipjack.StateFailed || (rec.State == skipjack.StatePending && rec.RunAt.After(now))
		},
		do: func(ctx context.Context, q skipjack.QueueAdmin, ids ...int64) (int64, error) {
			return q.Retry(ctx, ids...)
		},
	},
	"cancel": {
		Name: "cancel", Verb: "Cancel", Past: "cancelled", PastMany: "cancelled",
		Explain: "A pending job fails at once with the error \"cancelled\" and is not retried. A running job's handler has its context cancelled; the job then ends failed and is not retried.",
		applies: func(rec *skipjack.Record[json.RawMessage], _ time.Time) bool {
			return rec.State == skipjack.StatePending || rec.State == skipjack.StateRunning
		},
		do: func(ctx context.Context, q skipjack.QueueAdmin, ids ...int64) (int64, error) {
			return q.Cancel(ctx, ids...)
		},
	},
	"delete": {
		Name: "delete", Verb: "Delete", Past: "deleted", PastMany: "deleted",
		Explain: "The job's row is deleted from the queue table: it will not run, and its payload and error history are gone for good. A running job cannot be deleted; cancel it first.",
		applies: func(rec *skipjack.Record[json.RawMessage], _ time.Time) bool {
			return rec.State != skipjack.StateRunning
		},
		do: func(ctx context.Context, q skipjack.QueueAdmin, ids ...int64) (int64, error) {
			br, ok := q.(skipjack.QueueBrowser)
			if !ok {
				return 0, errNoDelete
			}
			return br.Delete(ctx, ids...)
		},
		browser: true,
		removes: true,
	},
}
