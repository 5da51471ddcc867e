package tableadmin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// ListNewest returns a page of jobs newest first, as the generated
// Admin's ListNewest does: the ids from the ListNewest query, then the
// jobs with List over the range they span.
func (a *Admin) ListNewest(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	switch p.State {
	case "", skipjack.StatePending, skipjack.StateRunning, skipjack.StateCompleted, skipjack.StateFailed:
	default:
		return nil, fmt.Errorf("unknown state %q (want pending, running, completed or failed)", p.State)
	}
	if p.Limit <= 0 {
		p.Limit = defaultListLimit
	}
	p.Limit = min(p.Limit, maxListLimit)
	payload, err := payloadArg(p.Payload)
	if err != nil {
		return nil, err
	}
	before := int64(math.MaxInt64)
	if p.BeforeID > 0 {
		before = p.BeforeID
	}
	if p.UntilID > 0 && p.UntilID < before {
		before = p.UntilID + 1
	}
	rows, err := a.db.Query(ctx, a.sql["ListNewest"], a.args("ListNewest", map[string]any{
		"after_id": p.AfterID, "before_id": before, "state": p.State, "payload": payload,
		"error_group": p.ErrorGroup, "max": int64(p.Limit),
	})...)
	if err != nil {
		return nil, a.wrap(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, a.wrap(err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	recs, err := a.List(ctx, skipjack.ListParams{
		State: p.State, AfterID: ids[len(ids)-1] - 1, UntilID: ids[0], Limit: maxListLimit,
		Payload: p.Payload, ErrorGroup: p.ErrorGroup,
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*skipjack.Record[json.RawMessage], len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]*skipjack.Record[json.RawMessage], 0, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// CountMatching counts by state the jobs that p's Payload and ErrorGroup
// select among the queue's skipjack.MatchCountScan newest jobs.
func (a *Admin) CountMatching(ctx context.Context, p skipjack.ListParams) (skipjack.MatchCounts, error) {
	payload, err := payloadArg(p.Payload)
	if err != nil {
		return skipjack.MatchCounts{}, err
	}
	var n []int64
	err = a.db.QueryRow(ctx, a.sql["CountMatching"], a.args("CountMatching", map[string]any{
		"payload": payload, "error_group": p.ErrorGroup, "scan": int64(skipjack.MatchCountScan),
	})...).Scan(&n)
	if err != nil {
		return skipjack.MatchCounts{}, a.wrap(err)
	}
	return skipjackimpl.MatchCountsOf(n)
}

// Delete deletes the jobs among ids that are not running and returns how
// many it deleted.
func (a *Admin) Delete(ctx context.Context, ids ...int64) (int64, error) {
	return a.change(ctx, "Delete", ids)
}

// payloadArg is the payload filter as the queries take it: "{}" for none.
func payloadArg(payload string) (string, error) {
	if payload == "" {
		return "{}", nil
	}
	var filter map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &filter); err != nil {
		return "", fmt.Errorf("the payload filter is not a JSON object: %w", err)
	}
	return payload, nil
}

var _ skipjack.QueueLimiter = (*Admin)(nil)

// Limits returns the queue's flow control as the YAML declares it, and
// its use now from the Headroom query that claims use.
func (a *Admin) Limits(ctx context.Context) (skipjack.Limits, error) {
	l := a.limits
	var due bool
	var claimed int32
	var waitMs int64
	if err := a.db.QueryRow(ctx, a.sql["Headroom"]).Scan(&due, &claimed, &waitMs); err != nil {
		return l, a.wrap(err)
	}
	l.Claimed, l.RateWait = int64(claimed), time.Duration(waitMs)*time.Millisecond
	return l, nil
}
