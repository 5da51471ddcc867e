package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// statsParallelism bounds how many queues the overview asks at once, so a
// dashboard over many queues does not take a connection per queue.
const statsParallelism = 4

// queueRow is one line of the overview.
type queueRow struct {
	Name  string
	Stats skipjack.Stats
	// Completed and Failed count the jobs finished in the last hour.
	Completed, Failed int64
	// Err says why the figures are missing, or is "".
	Err string
}

// overviewData is the overview page's model.
type overviewData struct {
	Rows  []queueRow
	Total queueRow
}

// overview serves the page of all queues.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, seg []string) {
	rows, at := h.overviewRows(r.Context())
	d := overviewData{Rows: rows}
	for _, row := range rows {
		d.Total.Stats.Pending += row.Stats.Pending
		d.Total.Stats.Scheduled += row.Stats.Scheduled
		d.Total.Stats.Running += row.Stats.Running
		d.Total.Stats.Completed += row.Stats.Completed
		d.Total.Stats.Failed += row.Stats.Failed
		d.Total.Stats.OldestPending = max(d.Total.Stats.OldestPending, row.Stats.OldestPending)
		d.Total.Completed += row.Completed
		d.Total.Failed += row.Failed
	}
	p := h.newPage(seg, "Queues", at)
	p.Data = d
	h.render(w, r, http.StatusOK, "overview", p)
}

// overviewMaxAge is how long requests share the overview's figures: any
// number of open, auto-refreshing overviews cost the database at most one
// round of Stats and Finished per queue per overviewMaxAge.
const overviewMaxAge = time.Second

// sharedFigures are the overview's figures as of at, shared between
// requests. mu is held while they are read from the database, so that
// concurrent requests wait for one computation instead of each starting
// their own.
type sharedFigures struct {
	mu   sync.Mutex
	at   time.Time
	rows []queueRow
}

// overviewRows returns every queue's figures and the time they are as of:
// the shared ones while younger than overviewMaxAge, else fresh ones.
func (h *Handler) overviewRows(ctx context.Context) ([]queueRow, time.Time) {
	f := &h.figures
	f.mu.Lock()
	defer f.mu.Unlock()
	now := h.now()
	if age := now.Sub(f.at); f.rows != nil && age >= 0 && age < overviewMaxAge {
		return f.rows, f.at
	}
	// Other requests may be waiting for these figures: do not let this
	// request's cancellation fail them.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.QueryTimeout)
	defer cancel()
	rows := make([]queueRow, len(h.names))
	sem := make(chan struct{}, statsParallelism)
	var wg sync.WaitGroup
	for i, name := range h.names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i] = h.queueRow(ctx, name, now)
		})
	}
	wg.Wait()
	f.rows, f.at = rows, now
	return rows, now
}

// queueRow reads one queue's figures for the overview.
func (h *Handler) queueRow(ctx context.Context, name string, now time.Time) queueRow {
	q := h.queues[name]
	row := queueRow{Name: name}
	st, err := q.Stats(ctx)
	if err != nil {
		row.Err = h.failed(ctx, "stats", name, err)
		return row
	}
	row.Stats = st
	row.Completed, row.Failed, err = q.Finished(ctx, now.Add(-time.Hour))
	if err != nil {
		row.Err = h.failed(ctx, "finished", name, err)
	}
	return row
}

// failed logs a failed database call and returns the text to show for it.
func (h *Handler) failed(ctx context.Context, what, queue string, err error) string {
	h.log.ErrorContext(ctx, "dashboard: "+what+" failed", "queue", queue, "err", err)
	return fmt.Sprintf("%s of %s failed: %v", what, queue, err)
}

// The states a queue page filters by, in tab order; "" is every state.
var listStates = []string{"", skipjack.StatePending, skipjack.StateRunning, skipjack.StateCompleted, skipjack.StateFailed}

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
	Name      string
	State     string
	Stats     skipjack.Stats
	StatsErr  string
	Tabs      []tab
	Jobs      []jobRow
	ListErr   string
	After     int64
	FirstURL  string
	NextURL   string
	FindID    string
	FindError string
	// Bulk are the actions on all jobs of the page they apply to.
	Bulk []actionLink
}

// queuePage serves one queue's jobs: a page of at most PageSize jobs in id
// order, in one state or all, after a given id. ?id=N jumps to job N.
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
	if a := query.Get("after"); a != "" {
		after, err := strconv.ParseInt(a, 10, 64)
		if err != nil || after < 0 {
			status = http.StatusBadRequest
			d.ListErr = "The after parameter must be a job id."
		} else {
			d.After = after
		}
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
	base := baseOf(seg)
	if st, err := q.Stats(ctx); err != nil {
		d.StatsErr = h.failed(ctx, "stats", name, err)
	} else {
		d.Stats = st
	}
	for _, s := range listStates {
		t := tab{Label: stateTitle(s), URL: base + queuePath(name, s, 0), Current: s == d.State}
		if d.StatsErr == "" {
			t.Count = strconv.FormatInt(stateCount(d.Stats, s), 10)
		}
		d.Tabs = append(d.Tabs, t)
	}
	if d.ListErr == "" {
		// One more than a page tells whether a next page exists.
		recs, err := q.List(ctx, skipjack.ListParams{State: d.State, AfterID: d.After, Limit: h.cfg.PageSize + 1})
		if err != nil {
			status = http.StatusInternalServerError
			d.ListErr = h.failed(ctx, "list", name, err)
		}
		if len(recs) > h.cfg.PageSize {
			recs = recs[:h.cfg.PageSize]
			d.NextURL = base + queuePath(name, d.State, recs[len(recs)-1].ID)
		}
		for _, rec := range recs {
			d.Jobs = append(d.Jobs, newJobRow(base, name, rec, now))
		}
		if h.cfg.Actions {
			d.Bulk = bulkLinks(base, name, d.State, recs, now)
		}
	}
	if d.After > 0 {
		d.FirstURL = base + queuePath(name, d.State, 0)
	}
	p := h.newPage(seg, "Queue "+name, now)
	p.Crumbs = []crumb{{Label: name}}
	p.Flash = flashMany(r)
	p.Data = d
	h.render(w, r, status, "queue", p)
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

// validState reports whether s is a state List filters by ("" is all).
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
// includes the scheduled jobs, as List's pending does.
func stateCount(st skipjack.Stats, s string) int64 {
	switch s {
	case skipjack.StatePending:
		return st.Pending + st.Scheduled
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

// timing is one line of a job page's timings.
type timing struct {
	Label string
	Value string
}

// actionLink is an action a job page offers.
type actionLink struct {
	Label string
	URL   string
}

// jobData is a job page's model.
type jobData struct {
	Queue   string
	Rec     *skipjack.Record[json.RawMessage]
	State   string
	Payload string
	Timings []timing
	Actions []actionLink
}

// jobPage serves one job.
func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, id int64) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	rec, ok := h.getJob(ctx, w, r, seg, q, id)
	if !ok {
		return
	}
	now := h.now()
	base := baseOf(seg)
	d := jobData{Queue: q.Name(), Rec: rec, State: displayState(rec, now), Payload: prettyJSON(rec.Payload), Timings: timings(rec, now)}
	if h.cfg.Actions {
		for _, name := range actionOrder {
			if a := actions[name]; a.applies(rec, now) {
				d.Actions = append(d.Actions, actionLink{Label: a.Verb + "…", URL: base + jobPath(d.Queue, id) + "/" + a.Name})
			}
		}
	}
	p := h.newPage(seg, fmt.Sprintf("Job %d", id), now)
	p.Crumbs = []crumb{{Label: d.Queue, URL: base + queuePath(d.Queue, "", 0)}, {Label: fmt.Sprintf("Job %d", id)}}
	p.Flash = flashFor(r, id)
	p.Data = d
	h.render(w, r, http.StatusOK, "job", p)
}

// getJob reads a job for a page, answering 404 or 500 itself when it
// cannot.
func (h *Handler) getJob(ctx context.Context, w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, id int64) (*skipjack.Record[json.RawMessage], bool) {
	rec, err := q.Get(ctx, id)
	switch {
	case errors.Is(err, skipjack.ErrNotFound):
		h.notFound(w, r, seg, fmt.Sprintf("Queue %s has no job %d (it may have completed and been deleted).", q.Name(), id))
		return nil, false
	case err != nil:
		h.serverError(w, r, seg, h.failed(ctx, "get", q.Name(), err))
		return nil, false
	}
	return rec, true
}

// timings lists how long a job waited and ran, as far as its record tells.
func timings(rec *skipjack.Record[json.RawMessage], now time.Time) []timing {
	var ts []timing
	if rec.RunAt.After(rec.CreatedAt) {
		ts = append(ts, timing{"Created to run at", formatDuration(rec.RunAt.Sub(rec.CreatedAt))})
	}
	switch {
	case rec.FinishedAt != nil:
		ts = append(ts, timing{"Enqueue to finish", formatDuration(rec.FinishedAt.Sub(rec.CreatedAt))})
		if rec.FinishedAt.After(rec.RunAt) {
			ts = append(ts, timing{"Run at to finish", formatDuration(rec.FinishedAt.Sub(rec.RunAt))})
		}
	case rec.State == skipjack.StatePending && !rec.RunAt.After(now):
		ts = append(ts, timing{"Waiting since run at", formatDuration(now.Sub(rec.RunAt))})
	case rec.State == skipjack.StatePending:
		ts = append(ts, timing{"Runs in", formatDuration(rec.RunAt.Sub(now))})
	case rec.State == skipjack.StateRunning:
		ts = append(ts, timing{"Age", formatDuration(now.Sub(rec.CreatedAt))})
	}
	return ts
}

// prettyJSON indents a payload; a payload that is not valid JSON is shown
// as it is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// confirmData is a confirmation page's model.
type confirmData struct {
	Queue    string
	Rec      *skipjack.Record[json.RawMessage]
	State    string
	Action   action
	Applies  bool
	Token    string
	PostURL  string
	BackURL  string
	Disabled bool
}

// confirmPage asks before an action.
func (h *Handler) confirmPage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, id int64, a action) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	rec, ok := h.getJob(ctx, w, r, seg, q, id)
	if !ok {
		return
	}
	now := h.now()
	base := baseOf(seg)
	name := q.Name()
	d := confirmData{
		Queue: name, Rec: rec, State: displayState(rec, now), Action: a, Applies: a.applies(rec, now),
		PostURL: base + jobPath(name, id) + "/" + a.Name, BackURL: base + jobPath(name, id),
		Disabled: !h.cfg.Actions,
	}
	status := http.StatusOK
	if h.cfg.Actions {
		d.Token = h.tokens.issue(a.Name, name, idsText([]int64{id}), now)
	} else {
		status = http.StatusForbidden
	}
	p := h.newPage(seg, fmt.Sprintf("%s job %d?", a.Verb, id), now)
	p.Crumbs = []crumb{
		{Label: name, URL: base + queuePath(name, "", 0)},
		{Label: fmt.Sprintf("Job %d", id), URL: d.BackURL},
		{Label: a.Verb},
	}
	p.RefreshMS = 0
	p.Data = d
	h.render(w, r, status, "confirm", p)
}

// act performs a confirmed action and redirects to the job's page.
func (h *Handler) act(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, id int64, a action) {
	if !h.allowAction(w, r, seg, q.Name(), a, idsText([]int64{id})) {
		return
	}
	n, ok := h.perform(w, r, seg, q, a, id)
	if !ok {
		return
	}
	seeOther(w, baseOf(seg)+jobPath(q.Name(), id)+"?done="+a.Name+"&changed="+strconv.FormatInt(n, 10), http.StatusSeeOther)
}

// allowAction checks a POSTed action before it runs: actions enabled, a
// same-origin request, and the form's token issued for exactly this action
// on exactly these jobs (ids as idsText writes them). It answers 403 itself
// and returns false when any check fails.
func (h *Handler) allowAction(w http.ResponseWriter, r *http.Request, seg []string, queue string, a action, ids string) bool {
	refuse := func(why string, err error) bool {
		h.log.WarnContext(r.Context(), "dashboard: action refused", "action", a.Name, "queue", queue, "ids", ids, "reason", why, "err", err)
		h.errorPage(w, r, seg, http.StatusForbidden, "Action refused", why)
		return false
	}
	if !h.cfg.Actions {
		return refuse("Actions are disabled on this dashboard.", nil)
	}
	if err := h.origins.Check(r); err != nil {
		return refuse("The request came from another site.", err)
	}
	if err := h.tokens.verify(r.PostForm.Get("token"), a.Name, queue, ids, h.now()); err != nil {
		why := "The form's token is not valid for this action; go back and try again."
		if errors.Is(err, errTokenExpired) {
			why = "The confirmation page has expired; go back and try again."
		}
		return refuse(why, err)
	}
	return true
}

// readForm parses a POSTed form of at most 64 KiB, answering 400 itself
// when it cannot.
func (h *Handler) readForm(w http.ResponseWriter, r *http.Request, seg []string) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, seg, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return false
	}
	return true
}

// perform runs an allowed action on ids and logs it, answering 500 itself
// when the database call fails.
func (h *Handler) perform(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, a action, ids ...int64) (int64, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	n, err := a.do(ctx, q, ids...)
	if err != nil {
		h.serverError(w, r, seg, h.failed(ctx, a.Name, q.Name(), err))
		return 0, false
	}
	h.log.InfoContext(ctx, "dashboard: "+a.Name, "queue", q.Name(), "ids", ids, "changed", n)
	return n, true
}

// flash is the result of an action, shown once on the job page it
// redirected to.
type flash struct {
	OK      bool
	Message string
}

// flashFor reads the ?done=&changed= of a redirect after an action. The
// message is built from fixed text, never echoed from the query.
func flashFor(r *http.Request, id int64) *flash {
	q := r.URL.Query()
	a, ok := actions[q.Get("done")]
	if !ok {
		return nil
	}
	if q.Get("changed") == "0" {
		return &flash{Message: fmt.Sprintf("Nothing changed: job %d was not in a state that %s applies to.", id, a.Name)}
	}
	return &flash{OK: true, Message: fmt.Sprintf("Job %d %s.", id, a.Past)}
}

// queuePath is the path of a queue page, relative to the mount point.
func queuePath(queue, state string, after int64) string {
	p := "queues/" + url.PathEscape(queue)
	var qs []string
	if state != "" {
		qs = append(qs, "state="+state)
	}
	if after > 0 {
		qs = append(qs, "after="+strconv.FormatInt(after, 10))
	}
	if len(qs) > 0 {
		p += "?" + strings.Join(qs, "&")
	}
	return p
}

// jobPath is the path of a job page, relative to the mount point.
func jobPath(queue string, id int64) string {
	return "queues/" + url.PathEscape(queue) + "/jobs/" + strconv.FormatInt(id, 10)
}
