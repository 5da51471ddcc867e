package dashboard

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// cursor is where a queue page starts: the newest jobs (zero), the jobs
// older than Before (?before=, the Older link), or the jobs newer than
// After (?after=, the Newer link). Pages list jobs newest first either way.
type cursor struct {
	Before, After int64
}

// values writes c as query parameters.
func (c cursor) query() []string {
	switch {
	case c.Before > 0:
		return []string{"before=" + strconv.FormatInt(c.Before, 10)}
	case c.After > 0:
		return []string{"after=" + strconv.FormatInt(c.After, 10)}
	}
	return nil
}

// listed is one page of a queue's jobs, newest first, with the cursors of
// its neighbours: Older (zero if there are none) and Newer (zero if this is
// the newest page).
type listed struct {
	recs         []*skipjack.Record[json.RawMessage]
	older, newer cursor
	// hasOlder and hasNewer say whether the links exist.
	hasOlder, hasNewer bool
}

// listNewestFirst reads the page at c of the jobs that p selects (State
// is a tab's filter, scheduled included), newest first: towards older
// jobs with ListNewest, towards newer ones with List (ascending, then
// reversed). Either direction reads one job more than a page to know
// whether the next page in that direction exists, and bounded scans
// (scheduled jobs, a payload or error filter) end early with a cursor to
// continue from.
func listNewestFirst(ctx context.Context, q skipjack.QueueAdmin, br skipjack.QueueBrowser, p skipjack.ListParams, c cursor, size int, filtered bool, now time.Time) (listed, error) {
	var l listed
	scheduled := p.State == stateScheduled
	if scheduled {
		p.State = skipjack.StatePending
	}
	if c.After > 0 {
		// Towards newer jobs: ascending from After, the oldest page of
		// them, shown newest first.
		var recs []*skipjack.Record[json.RawMessage]
		var resume int64
		var err error
		switch {
		case scheduled:
			recs, resume, err = listScheduled(ctx, q, p, c.After, size+1, now, scheduledScan)
		case filtered:
			p.AfterID = c.After
			recs, resume, err = listFiltered(ctx, q, p, size+1, filterScan)
		default:
			p.AfterID, p.Limit = c.After, size+1
			recs, err = q.List(ctx, p)
		}
		if err != nil {
			return l, err
		}
		switch {
		case len(recs) > size:
			recs = recs[:size]
			l.newer, l.hasNewer = cursor{After: recs[len(recs)-1].ID}, true
		case resume > 0:
			l.newer, l.hasNewer = cursor{After: resume}, true
		}
		slices.Reverse(recs)
		l.recs = recs
		l.hasOlder = true
		l.older = cursor{Before: c.After + 1}
		if len(recs) > 0 {
			l.older = cursor{Before: recs[len(recs)-1].ID}
		}
		return l, nil
	}
	var recs []*skipjack.Record[json.RawMessage]
	var resume int64
	var err error
	switch {
	case scheduled:
		recs, resume, err = listScheduledNewest(ctx, br, p, c.Before, size+1, now, scheduledScan)
	case filtered:
		p.BeforeID = c.Before
		recs, resume, err = listFilteredNewest(ctx, br, p, size+1, filterScan)
	default:
		p.BeforeID, p.Limit = c.Before, size+1
		recs, err = br.ListNewest(ctx, p)
	}
	if err != nil {
		return l, err
	}
	switch {
	case len(recs) > size:
		recs = recs[:size]
		l.older, l.hasOlder = cursor{Before: recs[len(recs)-1].ID}, true
	case resume > 0:
		l.older, l.hasOlder = cursor{Before: resume}, true
	}
	l.recs = recs
	if c.Before > 0 {
		l.hasNewer = true
		l.newer = cursor{After: c.Before - 1}
		if len(recs) > 0 {
			l.newer = cursor{After: recs[0].ID}
		}
	}
	return l, nil
}

// listScheduledNewest returns up to limit pending jobs with ids below
// before (0: no bound) whose run_at is after now and that p's Payload and
// ErrorGroup select, newest first, reading at most scan. When it stopped
// at that bound with fewer, resume is the last id it read (continue
// before it); otherwise 0.
func listScheduledNewest(ctx context.Context, br skipjack.QueueBrowser, p skipjack.ListParams, before int64, limit int, now time.Time, scan scanBound) (recs []*skipjack.Record[json.RawMessage], resume int64, err error) {
	for range scan.pages {
		page, err := br.ListNewest(ctx, skipjack.ListParams{State: skipjack.StatePending, BeforeID: before, Limit: scan.size, Payload: p.Payload, ErrorGroup: p.ErrorGroup})
		if err != nil {
			return nil, 0, err
		}
		for _, rec := range page {
			if rec.RunAt.After(now) {
				if recs = append(recs, rec); len(recs) == limit {
					return recs, 0, nil
				}
			}
		}
		if len(page) < scan.size {
			return recs, 0, nil
		}
		before = page[len(page)-1].ID
	}
	return recs, before, nil
}

// listFilteredNewest returns up to limit jobs below p.BeforeID (0: no
// bound) that p selects (its State, Payload and ErrorGroup), newest first,
// reading the table in windows of the primary key within scan, each
// starting at the newest job of p's state below the last (so gaps in the
// ids cost nothing). When it stopped at that bound with fewer, resume is
// the id to continue before; otherwise 0.
func listFilteredNewest(ctx context.Context, br skipjack.QueueBrowser, p skipjack.ListParams, limit int, scan scanBound) (recs []*skipjack.Record[json.RawMessage], resume int64, err error) {
	before := p.BeforeID
	for range scan.pages {
		// The newest job of this state below the window: one step of
		// the primary key finds where the window starts, or that there is
		// nothing left.
		top, err := br.ListNewest(ctx, skipjack.ListParams{State: p.State, BeforeID: before, Limit: 1})
		if err != nil {
			return nil, 0, err
		}
		if len(top) == 0 {
			return recs, 0, nil
		}
		hi := top[0].ID + 1
		lo := max(hi-1-int64(scan.size), 0)
		w := p
		w.AfterID, w.BeforeID, w.UntilID, w.Limit = lo, hi, 0, limit-len(recs)
		page, err := br.ListNewest(ctx, w)
		if err != nil {
			return nil, 0, err
		}
		if recs = append(recs, page...); len(recs) >= limit {
			return recs, 0, nil
		}
		if lo == 0 {
			return recs, 0, nil
		}
		before = lo + 1
	}
	return recs, before, nil
}
