package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// ByUniqueKey reports whether a List with p can read a queue's unique
// index instead of its table: the queue's key is made of the payload
// fields keys, p's payload filter sets every one of them, p asks for one
// of the key's states, and no error group. The index then holds every job
// that p selects.
func ByUniqueKey(keys, states []string, p skipjack.ListParams) bool {
	if len(keys) == 0 || p.Payload == "" || p.ErrorGroup != "" || !slices.Contains(states, p.State) {
		return false
	}
	var filter map[string]json.RawMessage
	if err := json.Unmarshal([]byte(p.Payload), &filter); err != nil {
		return false
	}
	for _, k := range keys {
		if _, ok := filter[k]; !ok {
			return false
		}
	}
	return true
}

// PageOfIDs returns the records of the jobs among ids (in id order) that
// are on p's page: after AfterID, up to UntilID when set, in p.State, at
// most p.Limit of them, reading each with get (a job gone meanwhile is
// skipped).
func PageOfIDs[R any](ctx context.Context, ids []int64, p skipjack.ListParams, get func(context.Context, int64) (R, string, bool, error)) ([]R, error) {
	var out []R
	for _, id := range ids {
		if id <= p.AfterID || (p.UntilID > 0 && id > p.UntilID) {
			continue
		}
		rec, state, ok, err := get(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok && state == p.State {
			if out = append(out, rec); len(out) == p.Limit {
				break
			}
		}
	}
	return out, nil
}

// listByUniqueKey lists the page p selects through the unique index.
func (q *Queue[P]) listByUniqueKey(ctx context.Context, qs queries, p skipjack.ListParams) ([]*skipjack.Record[[]byte], error) {
	ids, err := qs.unique().FindUnique(ctx, p.Payload)
	if err != nil {
		return nil, err
	}
	return PageOfIDs(ctx, ids, p, func(ctx context.Context, id int64) (*skipjack.Record[[]byte], string, bool, error) {
		rec, err := qs.get(ctx, id)
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, "", false, nil
			}
			return nil, "", false, err
		}
		return rec, rec.State, true, nil
	})
}
