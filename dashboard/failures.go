package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// failureGroupsShown is how many failure groups a failures page lists.
const failureGroupsShown = 50

// maxGroupRetry is how many jobs of a failure group one confirmed retry
// retries (one Retry statement over that many ids); a larger group takes
// several confirmations.
const maxGroupRetry = 1000

// groupScan bounds the rows that collecting a group's jobs reads.
var groupScan = scanBound{pages: 20, size: 10_000}

// groupRow is one line of the failures page.
type groupRow struct {
	skipjack.FailureGroup
	ListURL  string
	RetryURL string
}

// failuresData is the failures page's model.
type failuresData struct {
	Queue  string
	Groups []groupRow
	Err    string
	Scan   int
}

// errNoInsights is what the pages that need recorded activity, failure
// groups or schedules show for a queue whose QueueAdmin does not implement
// skipjack.QueueInsights (one written by hand, say).
var errNoInsights = errors.New("this queue's admin does not record activity, failure groups or schedules (it does not implement skipjack.QueueInsights)")

// failuresPage serves a queue's failed jobs grouped by their normalised
// last error.
func (h *Handler) failuresPage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	now := h.now()
	base := baseOf(seg)
	name := q.Name()
	d := failuresData{Queue: name, Scan: skipjack.FailureGroupsScan}
	status := http.StatusOK
	var groups []skipjack.FailureGroup
	var err error
	if in, ok := q.(skipjack.QueueInsights); ok {
		groups, err = in.FailureGroups(ctx, failureGroupsShown)
	} else {
		err = errNoInsights
	}
	if err != nil {
		status = http.StatusInternalServerError
		d.Err = h.failed(ctx, "failure groups", name, err)
	}
	for _, g := range groups {
		row := groupRow{FailureGroup: g, ListURL: base + listPath(name, skipjack.StateFailed, cursor{}, listFilter{Error: g.Error})}
		if h.cfg.Actions {
			row.RetryURL = base + failuresPath(name) + "/retry?" + url.Values{"error": {g.Error}}.Encode()
		}
		d.Groups = append(d.Groups, row)
	}
	p := h.newPage(seg, "Failures of "+name, now)
	p.Crumbs = []crumb{{Label: name, URL: base + queuePath(name, "")}, {Label: "Failures"}}
	p.Flash = flashGroup(r)
	p.Data = d
	h.render(w, r, status, "failures", p)
}

// groupAction is the retry of a failure group, which its token names.
const groupAction = "retry-group"

// confirmGroupData is the model of the page that confirms the retry of a
// failure group.
type confirmGroupData struct {
	Queue    string
	Error    string
	Jobs     int
	More     bool
	Token    string
	PostURL  string
	BackURL  string
	ListURL  string
	Disabled bool
}

// confirmGroupPage asks before retrying the failed jobs of the group
// ?error=.
func (h *Handler) confirmGroupPage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	group := r.URL.Query().Get("error")
	if group == "" {
		h.errorPage(w, r, seg, http.StatusBadRequest, "Bad request", "Which failure group? The error parameter is missing.")
		return
	}
	now := h.now()
	base := baseOf(seg)
	name := q.Name()
	d := confirmGroupData{
		Queue: name, Error: group, Disabled: !h.cfg.Actions,
		PostURL: base + failuresPath(name) + "/retry", BackURL: base + failuresPath(name),
		ListURL: base + listPath(name, skipjack.StateFailed, cursor{}, listFilter{Error: group}),
	}
	status := http.StatusOK
	if h.cfg.Actions {
		ids, more, err := groupIDs(ctx, q, group)
		if err != nil {
			h.serverError(w, r, seg, h.failed(ctx, "list group", name, err))
			return
		}
		d.Jobs, d.More = len(ids), more
		d.Token = h.tokens.issue(groupAction, name, group, now)
	} else {
		status = http.StatusForbidden
	}
	p := h.newPage(seg, "Retry a failure group?", now)
	p.Crumbs = []crumb{{Label: name, URL: base + queuePath(name, "")}, {Label: "Failures", URL: d.BackURL}, {Label: "Retry"}}
	p.RefreshMS = 0
	p.Data = d
	h.render(w, r, status, "confirmgroup", p)
}

// actGroup retries the failed jobs of a confirmed group and redirects to
// the failures page.
func (h *Handler) actGroup(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin) {
	group := r.PostForm.Get("error")
	retry := actions["retry"]
	retry.Name = groupAction
	if !h.allowAction(w, r, seg, q.Name(), retry, group) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	ids, _, err := groupIDs(ctx, q, group)
	if err != nil {
		h.serverError(w, r, seg, h.failed(ctx, "list group", q.Name(), err))
		return
	}
	var n int64
	if len(ids) > 0 {
		var ok bool
		if n, ok = h.perform(w, r, seg, q, actions["retry"], ids...); !ok {
			return
		}
	}
	v := url.Values{"retried": {strconv.FormatInt(n, 10)}, "of": {strconv.Itoa(len(ids))}}
	seeOther(w, baseOf(seg)+failuresPath(q.Name())+"?"+v.Encode(), http.StatusSeeOther)
}

// groupIDs returns the ids of up to maxGroupRetry failed jobs of the
// group, and whether there are more.
func groupIDs(ctx context.Context, q skipjack.QueueAdmin, group string) ([]int64, bool, error) {
	recs, resume, err := listFiltered(ctx, q, skipjack.ListParams{State: skipjack.StateFailed, ErrorGroup: group}, maxGroupRetry+1, groupScan)
	if err != nil {
		return nil, false, err
	}
	more := resume > 0 || len(recs) > maxGroupRetry
	recs = recs[:min(len(recs), maxGroupRetry)]
	ids := make([]int64, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ID
	}
	return ids, more, nil
}

// flashGroup reads the ?retried=&of= of the redirect after a group retry.
func flashGroup(r *http.Request) *flash {
	q := r.URL.Query()
	n, err1 := strconv.ParseInt(q.Get("retried"), 10, 64)
	of, err2 := strconv.ParseInt(q.Get("of"), 10, 64)
	if err1 != nil || err2 != nil || n < 0 || of < n {
		return nil
	}
	msg := fmt.Sprintf("Retried %d of %s in the group: they are pending now.", n, jobsCount(int(of)))
	if n < of {
		msg += " The others were no longer failed or would have been duplicates."
	}
	return &flash{OK: n > 0, Message: msg}
}

// failuresPath is the path of a queue's failures page.
func failuresPath(queue string) string {
	return "queues/" + url.PathEscape(queue) + "/failures"
}
