package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// stateScheduled is the Scheduled tab's filter: pending jobs whose run_at
// is in the future (delays, backoffs, snoozes), the overview's Scheduled
// column. It is no stored state, so List cannot filter by it; the tab reads
// pending jobs and keeps the scheduled ones (listScheduled).
const stateScheduled = "scheduled"

// The states a queue page filters by, in tab order; "" is every state.
var listStates = []string{"", skipjack.StatePending, stateScheduled, skipjack.StateRunning, skipjack.StateCompleted, skipjack.StateFailed}

// scanBound bounds the pending jobs one Scheduled page reads: pages pages
// of size jobs.
type scanBound struct{ pages, size int }

// scheduledScan is the bound of the Scheduled tab: a queue with a large
// due backlog ahead of its scheduled jobs costs a bounded request (at most
// 10 List calls of 1000, List's cap); the page then ends early with a link
// that continues the scan.
var scheduledScan = scanBound{pages: 10, size: 1000}

// listScheduled returns up to limit pending jobs with ids above after
// whose run_at is after now and that filter's Payload and ErrorGroup
// select, in id order, reading at most scan. When it
// stopped at that bound with fewer, resume is the last id it read
// (continue after it); otherwise 0.
func listScheduled(ctx context.Context, q skipjack.QueueAdmin, filter skipjack.ListParams, after int64, limit int, now time.Time, scan scanBound) (recs []*skipjack.Record[json.RawMessage], resume int64, err error) {
	for range scan.pages {
		page, err := q.List(ctx, skipjack.ListParams{State: skipjack.StatePending, AfterID: after, Limit: scan.size, Payload: filter.Payload, ErrorGroup: filter.ErrorGroup})
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
		after = page[len(page)-1].ID
	}
	return recs, after, nil
}

// tab is one state filter of a queue page.
type tab struct {
	Label   string
	URL     string
	Count   string
	Current bool
}

// jobRow is one line of a queue page's job table.
type jobRow struct {
	ID          int64
	URL         string
	State       string
	Attempt     int
	MaxAttempts int
	Priority    int
	CreatedAt   time.Time
	RunAt       time.Time
	FinishedAt  *time.Time
	LastError   string
}

// queueData is a queue page's model.
type queueData struct {
	Name     string
	State    string
	Stats    skipjack.Stats
	StatsErr string
	Tabs     []tab
	Jobs     []jobRow
	ListErr  string
	// Cursor is where the page starts; Newest says the page lists jobs
	// newest first (every QueueAdmin that is a QueueBrowser), else in id
	// order.
	Cursor   cursor
	Newest   bool
	FirstURL string
	NextURL  string
	// NewerURL and OlderURL page newest-first lists both ways.
	NewerURL string
	OlderURL string
	// CountsPartial says the tabs count a filter's jobs among the queue's
	// newest skipjack.MatchCountScan only; CountsFiltered that they count
	// under the filter at all.
	CountsFiltered bool
	CountsPartial  bool
	CountsErr      string
	// Selectable says the job table has checkboxes to act on selected
	// jobs (delete).
	Selectable bool
	SelectURL  string
	FindID     string
	FindError  string
	// Bulk are the actions on all jobs of the page they apply to.
	Bulk []actionLink
	// Chart is the queue's activity.
	Chart chart
	// Filter narrows the jobs; Where is its first condition as the form
	// shows it, FilterText the conditions in a sentence.
	Filter      listFilter
	Where       string
	WhereText   string
	FilterError string
	ClearURL    string
	FailuresURL string
	// Toggle pauses or resumes the queue, when actions are enabled.
	Toggle *actionLink
	// Limits are the queue's flow control settings and their use now.
	Limits    []limitRow
	LimitsErr string
	// Schedules are the queue's periodic jobs.
	Schedules    []skipjack.ScheduleInfo
	SchedulesErr string
	// Flow describes the queue's limits and serial key ("" for none, or
	// when its admin does not implement skipjack.QueueFlow);
	// FlowLimited says whether it declares a limit, FlowConcurrency is
	// limits.concurrency (0: none).
	Flow            string
	FlowLimited     bool
	FlowConcurrency int
}

// queuePage serves one queue's jobs: a page of at most PageSize jobs,
// newest first, in one state or all, older than ?before= or newer than
// ?after= (keyset pages both ways). ?id=N jumps to job N. A QueueAdmin that
// is no QueueBrowser lists jobs in id order, after ?after=.
func (h *Handler) queuePage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	now := h.now()
	name := q.Name()
	query := r.URL.Query()
	d := queueData{Name: name, State: query.Get("state")}
	status := http.StatusOK
	if !validState(d.State) {
		status = http.StatusBadRequest
		d.ListErr = fmt.Sprintf("Unknown state %q; choose one of the tabs.", d.State)
		d.State = ""
	}
	br, browse := q.(skipjack.QueueBrowser)
	d.Newest = browse
	for _, param := range []string{"after", "before"} {
		a := query.Get(param)
		if a == "" {
			continue
		}
		id, err := strconv.ParseInt(a, 10, 64)
		switch {
		case err != nil || id < 0:
			status = http.StatusBadRequest
			d.ListErr = "The " + param + " parameter must be a job id."
		case param == "after":
			d.Cursor.After = id
		case browse:
			d.Cursor.Before = id
		}
	}
	if d.Cursor.After > 0 && d.Cursor.Before > 0 {
		status = http.StatusBadRequest
		d.ListErr = "A page starts after a job or before one, not both."
	}
	if s := strings.TrimSpace(query.Get("id")); s != "" {
		d.FindID = s
		id, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil || id <= 0:
			status = http.StatusBadRequest
			d.FindError = fmt.Sprintf("%q is not a job id: a job id is a positive whole number.", s)
		default:
			if _, err := q.Get(ctx, id); err == nil {
				seeOther(w, baseOf(seg)+jobPath(name, id), http.StatusSeeOther)
				return
			} else if errors.Is(err, skipjack.ErrNotFound) {
				status = http.StatusNotFound
				d.FindError = fmt.Sprintf("Queue %s has no job %d.", name, id)
			} else {
				status = http.StatusInternalServerError
				d.FindError = h.failed(ctx, "get", name, err)
			}
		}
	}
	for _, w := range query["where"] {
		if w = strings.TrimSpace(w); w != "" {
			d.Filter.Where = append(d.Filter.Where, w)
		}
	}
	d.Filter.Error = query.Get("error")
	payload, err := payloadFilter(d.Filter.Where)
	if err != nil {
		status = http.StatusBadRequest
		d.FilterError = err.Error()
		d.Filter.Where = nil
	}
	if len(d.Filter.Where) > 0 {
		d.Where, d.WhereText = d.Filter.Where[0], whereText(d.Filter.Where)
	}
	base := baseOf(seg)
	d.FailuresURL = base + failuresPath(name)
	if d.Filter.active() {
		d.ClearURL = base + queuePath(name, d.State)
	}
	filter := skipjack.ListParams{State: d.State, Payload: payload, ErrorGroup: d.Filter.Error}
	if st, err := q.Stats(ctx); err != nil {
		d.StatsErr = h.failed(ctx, "stats", name, err)
	} else {
		d.Stats = st
	}
	if h.cfg.Actions && d.StatsErr == "" {
		t := toggleFor(base, name, d.Stats.Paused)
		d.Toggle = &t
	}
	d.Tabs = h.tabs(ctx, &d, br, filter, base)
	d.Limits, d.LimitsErr = h.queueLimits(ctx, q)
	in, insights := q.(skipjack.QueueInsights)
	if insights {
		if d.Schedules, err = in.Schedules(ctx); err != nil {
			d.SchedulesErr = h.failed(ctx, "schedules", name, err)
		}
	}
	rng, ok := rangeNamed(query.Get("range"))
	if !ok {
		status = http.StatusBadRequest
	}
	var mins []skipjack.ActivityMinute
	if insights {
		mins, err = in.Activity(ctx, now.Add(-activitySpan))
	} else {
		err = errNoInsights
	}
	if err != nil {
		d.Chart = chart{ID: "queue", Range: rng, Err: h.failed(ctx, "activity", name, err)}
	} else {
		d.Chart = newChart("queue", mins, rng, now)
	}
	d.Chart.Ranges = rangeLinks(base+queuePath(name, ""), rng)
	if d.ListErr == "" {
		var recs []*skipjack.Record[json.RawMessage]
		var err error
		if browse {
			recs, err = h.listNewest(ctx, &d, q, br, filter, now, base)
		} else {
			recs, err = h.listOldest(ctx, &d, q, filter, now, base)
		}
		if err != nil {
			status = http.StatusInternalServerError
			d.ListErr = h.failed(ctx, "list", name, err)
		}
		for _, rec := range recs {
			d.Jobs = append(d.Jobs, newJobRow(base, name, rec, now))
		}
		if h.cfg.Actions {
			d.Bulk = bulkLinks(base, name, d.State, recs, now, browse)
			if browse && len(recs) > 0 {
				d.Selectable = true
				d.SelectURL = base + queuePath(name, "") + "/delete"
			}
		}
	}
	if d.Cursor != (cursor{}) {
		d.FirstURL = base + listPath(name, d.State, cursor{}, d.Filter)
	}
	p := h.newPage(seg, "Queue "+name, now)
	p.Crumbs = []crumb{{Label: name}}
	p.Flash = flashMany(r)
	if f := flashQueue(r, name); f != nil {
		p.Flash = f
	}
	p.Data = d
	h.render(w, r, status, "queue", p)
}

// listNewest reads the page of d's cursor newest first and sets the
// page's links to its neighbours.
func (h *Handler) listNewest(ctx context.Context, d *queueData, q skipjack.QueueAdmin, br skipjack.QueueBrowser, filter skipjack.ListParams, now time.Time, base string) ([]*skipjack.Record[json.RawMessage], error) {
	l, err := listNewestFirst(ctx, q, br, filter, d.Cursor, h.cfg.PageSize, d.Filter.active(), now)
	if err != nil {
		return nil, err
	}
	if l.hasOlder {
		d.OlderURL = base + listPath(d.Name, d.State, l.older, d.Filter)
	}
	if l.hasNewer {
		d.NewerURL = base + listPath(d.Name, d.State, l.newer, d.Filter)
	}
	return l.recs, nil
}

// listOldest reads the page after d's cursor in id order, for a
// QueueAdmin without QueueBrowser, and sets the link to the next page.
func (h *Handler) listOldest(ctx context.Context, d *queueData, q skipjack.QueueAdmin, filter skipjack.ListParams, now time.Time, base string) ([]*skipjack.Record[json.RawMessage], error) {
	// One more than a page tells whether a next page exists.
	var recs []*skipjack.Record[json.RawMessage]
	var resume int64
	var err error
	after := d.Cursor.After
	filter.AfterID = after
	switch {
	case d.State == stateScheduled:
		recs, resume, err = listScheduled(ctx, q, filter, after, h.cfg.PageSize+1, now, scheduledScan)
	case d.Filter.active():
		recs, resume, err = listFiltered(ctx, q, filter, h.cfg.PageSize+1, filterScan)
	default:
		filter.Limit = h.cfg.PageSize + 1
		recs, err = q.List(ctx, filter)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case len(recs) > h.cfg.PageSize:
		recs = recs[:h.cfg.PageSize]
		d.NextURL = base + listPath(d.Name, d.State, cursor{After: recs[len(recs)-1].ID}, d.Filter)
	case resume > 0:
		d.NextURL = base + listPath(d.Name, d.State, cursor{After: resume}, d.Filter)
	}
	return recs, nil
}

// tabs are a queue page's state tabs, each keeping the page's filter,
// with its count: under the filter when one is active and the queue's
// admin can count (QueueBrowser), else from the queue's stats.
func (h *Handler) tabs(ctx context.Context, d *queueData, br skipjack.QueueBrowser, filter skipjack.ListParams, base string) []tab {
	var count func(string) string
	switch {
	case d.Filter.active() && br != nil:
		mc, err := br.CountMatching(ctx, filter)
		if err != nil {
			d.CountsErr = h.failed(ctx, "count", d.Name, err)
			break
		}
		d.CountsFiltered, d.CountsPartial = true, mc.Partial
		count = func(s string) string {
			n := strconv.FormatInt(matchCount(mc, s), 10)
			if mc.Partial {
				n += "+"
			}
			return n
		}
	case d.StatsErr == "" && !d.Filter.active():
		count = func(s string) string { return strconv.FormatInt(stateCount(d.Stats, s), 10) }
	}
	var tabs []tab
	for _, s := range listStates {
		t := tab{Label: stateTitle(s), URL: base + listPath(d.Name, s, cursor{}, d.Filter), Current: s == d.State}
		if count != nil {
			t.Count = count(s)
		}
		tabs = append(tabs, t)
	}
	return tabs
}

// matchCount is the count of a state tab under a filter, as stateCount is
// without one.
func matchCount(mc skipjack.MatchCounts, s string) int64 {
	return stateCount(skipjack.Stats{Pending: mc.Pending, Scheduled: mc.Scheduled, Running: mc.Running, Completed: mc.Completed, Failed: mc.Failed}, s)
}

// newJobRow turns a record into a job table line.
func newJobRow(base, queue string, rec *skipjack.Record[json.RawMessage], now time.Time) jobRow {
	row := jobRow{
		ID: rec.ID, URL: base + jobPath(queue, rec.ID), State: displayState(rec, now),
		Attempt: rec.Attempt, MaxAttempts: rec.MaxAttempts, Priority: rec.Priority,
		CreatedAt: rec.CreatedAt, RunAt: rec.RunAt, FinishedAt: rec.FinishedAt,
	}
	if n := len(rec.Errors); n > 0 {
		row.LastError = rec.Errors[n-1].Error
	}
	return row
}

// validState reports whether s is a state tab's filter ("" is all).
func validState(s string) bool {
	for _, v := range listStates {
		if s == v {
			return true
		}
	}
	return false
}

// stateTitle is the label of a state tab.
func stateTitle(s string) string {
	if s == "" {
		return "All"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// stateCount is the count the stats give for a state tab; pending there
// includes the scheduled jobs, as List's pending does, and Scheduled
// counts them alone.
func stateCount(st skipjack.Stats, s string) int64 {
	switch s {
	case skipjack.StatePending:
		return st.Pending + st.Scheduled
	case stateScheduled:
		return st.Scheduled
	case skipjack.StateRunning:
		return st.Running
	case skipjack.StateCompleted:
		return st.Completed
	case skipjack.StateFailed:
		return st.Failed
	}
	return st.Pending + st.Scheduled + st.Running + st.Completed + st.Failed
}

// displayState is a job's state as the dashboard shows it: a pending job
// whose run_at is in the future is "scheduled".
func displayState(rec *skipjack.Record[json.RawMessage], now time.Time) string {
	if rec.State == skipjack.StatePending && rec.RunAt.After(now) {
		return "scheduled"
	}
	return rec.State
}

// queuePath is the path of the first page of a queue's jobs in a state
// ("" for all), relative to the mount point.
func queuePath(queue, state string) string {
	return listPath(queue, state, cursor{}, listFilter{})
}

// listPath is the path of the page at c of a queue's jobs that state and
// filter select.
func listPath(queue, state string, c cursor, filter listFilter) string {
	p := "queues/" + url.PathEscape(queue)
	var qs []string
	if state != "" {
		qs = append(qs, "state="+state)
	}
	qs = append(qs, c.query()...)
	v := url.Values{}
	filter.values(v)
	if len(v) > 0 {
		qs = append(qs, v.Encode())
	}
	if len(qs) > 0 {
		p += "?" + strings.Join(qs, "&")
	}
	return p
}
