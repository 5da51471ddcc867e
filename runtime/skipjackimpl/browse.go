package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// browseQueries are the queries behind skipjack.QueueBrowser: newest-first
// listing, counts under a filter and deletion. Their results are plain
// values (ids, an array of counts), so that no row type of sqlc's joins
// the Queries constraint for them.
type browseQueries interface {
	ListNewest(ctx context.Context, afterID int64, beforeID int64, state string, payload string, errorGroup string, max int32) ([]int64, error)
	CountMatching(ctx context.Context, payload string, errorGroup string, scan int32) ([]int64, error)
	Delete(ctx context.Context, ids []int64) (int64, error)
}

// errNoBrowse says that a queue's generated code predates browseQueries.
var errNoBrowse = errors.New("the queue's generated code has no newest-first listing, counting or deleting: run skipjack generate")

// ListNewest returns a page of jobs newest first (see
// skipjack.QueueBrowser).
func (q *Queue[P]) ListNewest(ctx context.Context, db DBTX, p skipjack.ListParams) ([]*skipjack.Record[P], error) {
	raws, err := q.listNewestRaw(ctx, db, p)
	if err != nil {
		return nil, err
	}
	out := make([]*skipjack.Record[P], len(raws))
	for i, raw := range raws {
		if out[i], err = typed[P](raw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listNewestRaw reads the ids of the page newest first, then the jobs
// with List over the range they span, in the ids' order. A job that left
// the page's state between the two reads is left out.
func (q *Queue[P]) listNewestRaw(ctx context.Context, db DBTX, p skipjack.ListParams) ([]*skipjack.Record[[]byte], error) {
	if err := q.checkList(p); err != nil {
		return nil, err
	}
	qs := q.bind(db)
	bq := qs.browse()
	if bq == nil {
		return nil, fmt.Errorf("list %s: %w", q.spec.Name, errNoBrowse)
	}
	p.Limit = listLimit(p.Limit)
	before := int64(math.MaxInt64)
	if p.BeforeID > 0 {
		before = p.BeforeID
	}
	if p.UntilID > 0 && p.UntilID < before {
		before = p.UntilID + 1
	}
	payload := "{}"
	if p.Payload != "" {
		payload = p.Payload
	}
	ids, err := bq.ListNewest(ctx, p.AfterID, before, p.State, payload, p.ErrorGroup, int32(p.Limit))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.spec.Name, err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := qs.list(ctx, skipjack.ListParams{
		State: p.State, AfterID: ids[len(ids)-1] - 1, UntilID: ids[0], Limit: maxListLimit,
		Payload: p.Payload, ErrorGroup: p.ErrorGroup,
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.spec.Name, err)
	}
	byID := make(map[int64]*skipjack.Record[[]byte], len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	out := make([]*skipjack.Record[[]byte], 0, len(ids))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// CountMatching counts by state the jobs that p's Payload and ErrorGroup
// select among the queue's skipjack.MatchCountScan newest jobs.
func (q *Queue[P]) CountMatching(ctx context.Context, db DBTX, p skipjack.ListParams) (skipjack.MatchCounts, error) {
	bq := q.bind(db).browse()
	if bq == nil {
		return skipjack.MatchCounts{}, fmt.Errorf("count %s jobs: %w", q.spec.Name, errNoBrowse)
	}
	if err := checkPayloadFilter(p.Payload); err != nil {
		return skipjack.MatchCounts{}, fmt.Errorf("count %s jobs: %w", q.spec.Name, err)
	}
	payload := "{}"
	if p.Payload != "" {
		payload = p.Payload
	}
	n, err := bq.CountMatching(ctx, payload, p.ErrorGroup, skipjack.MatchCountScan)
	if err != nil {
		return skipjack.MatchCounts{}, fmt.Errorf("count %s jobs: %w", q.spec.Name, err)
	}
	return MatchCountsOf(n)
}

// MatchCountsOf reads the array of a CountMatching query: pending,
// scheduled, running, completed, failed, scanned.
func MatchCountsOf(n []int64) (skipjack.MatchCounts, error) {
	if len(n) != 6 {
		return skipjack.MatchCounts{}, fmt.Errorf("CountMatching returned %d counts, want 6", len(n))
	}
	return skipjack.MatchCounts{
		Pending: n[0], Scheduled: n[1], Running: n[2], Completed: n[3], Failed: n[4],
		Scanned: n[5], Partial: n[5] >= skipjack.MatchCountScan,
	}, nil
}

// Delete deletes the jobs among ids that are not running and returns how
// many it deleted.
func (q *Queue[P]) Delete(ctx context.Context, db DBTX, ids ...int64) (int64, error) {
	bq := q.bind(db).browse()
	if bq == nil {
		return 0, fmt.Errorf("delete %s jobs: %w", q.spec.Name, errNoBrowse)
	}
	n, err := bq.Delete(ctx, slices.Clone(ids))
	if err != nil {
		return 0, fmt.Errorf("delete %s jobs: %w", q.spec.Name, err)
	}
	return n, nil
}

// checkPayloadFilter refuses a payload filter that is not a JSON object.
func checkPayloadFilter(payload string) error {
	if payload == "" {
		return nil
	}
	var filter map[string]json.RawMessage
	if err := json.Unmarshal([]byte(payload), &filter); err != nil {
		return fmt.Errorf("the payload filter is not a JSON object: %w", err)
	}
	return nil
}

func (a admin[P]) ListNewest(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	raws, err := a.q.listNewestRaw(ctx, a.db, p)
	if err != nil {
		return nil, err
	}
	out := make([]*skipjack.Record[json.RawMessage], len(raws))
	for i, r := range raws {
		out[i] = rawMessage(r)
	}
	return out, nil
}

func (a admin[P]) CountMatching(ctx context.Context, p skipjack.ListParams) (skipjack.MatchCounts, error) {
	return a.q.CountMatching(ctx, a.db, p)
}

func (a admin[P]) Delete(ctx context.Context, ids ...int64) (int64, error) {
	return a.q.Delete(ctx, a.db, ids...)
}

var _ skipjack.QueueBrowser = admin[struct{}]{}

func (a admin[P]) Limits(ctx context.Context) (skipjack.Limits, error) {
	return a.q.Limits(ctx, a.db)
}

var _ skipjack.QueueLimiter = admin[struct{}]{}

// Limits returns the queue's declared flow control and its use now: the
// jobs claimed in all processes and the wait until the rate window has
// room, from the Headroom query that claims use.
func (q *Queue[P]) Limits(ctx context.Context, db DBTX) (skipjack.Limits, error) {
	l := q.spec.flow()
	ls, ok := q.bind(db).(limitStore)
	if !ok {
		return l, nil
	}
	h, err := ls.Headroom(ctx)
	if err != nil {
		return l, fmt.Errorf("limits of %s: %w", q.spec.Name, err)
	}
	l.Claimed, l.RateWait = int64(h.Claimed), time.Duration(h.RateWaitMs)*time.Millisecond
	return l, nil
}
