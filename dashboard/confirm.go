package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// confirmData is a confirmation page's model.
type confirmData struct {
	Queue   string
	Rec     *skipjack.Record[json.RawMessage]
	State   string
	Action  action
	Applies bool
	// LastError is the job's most recent error, or "".
	LastError string
	Token     string
	PostURL   string
	BackURL   string
	Disabled  bool
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
	if n := len(rec.Errors); n > 0 {
		d.LastError = rec.Errors[n-1].Error
	}
	status := http.StatusOK
	if h.cfg.Actions {
		d.Token = h.tokens.issue(a.Name, name, idsText([]int64{id}), now)
	} else {
		status = http.StatusForbidden
	}
	p := h.newPage(seg, fmt.Sprintf("%s job %d?", a.Verb, id), now)
	p.Crumbs = []crumb{
		{Label: name, URL: base + queuePath(name, "")},
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
	if a.removes {
		v := url.Values{"done": {a.Name}, "changed": {strconv.FormatInt(n, 10)}, "of": {"1"}}
		seeOther(w, baseOf(seg)+queuePath(q.Name(), "")+"?"+v.Encode(), http.StatusSeeOther)
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
