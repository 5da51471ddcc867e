package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// confirmManyData is the model of the confirmation page of an action on
// several jobs.
type confirmManyData struct {
	Queue    string
	Action   action
	Jobs     []actionLink
	IDs      string
	State    string
	Token    string
	PostURL  string
	BackURL  string
	Disabled bool
}

// confirmManyPage asks before an action on the jobs ?ids= (as a queue page
// links them, comma-separated, or as its selection form sends them, one
// ids= per checked job; at most maxPageSize); ?state= is the queue page's
// filter to return to.
func (h *Handler) confirmManyPage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, a action) {
	query := r.URL.Query()
	ids, err := parseIDs(strings.Join(query["ids"], ","), maxPageSize)
	if err != nil {
		h.errorPage(w, r, seg, http.StatusBadRequest, "Bad request", "The jobs to "+a.Name+" are not a list of job ids: "+err.Error()+".")
		return
	}
	state := query.Get("state")
	if !validState(state) {
		state = ""
	}
	now := h.now()
	base := baseOf(seg)
	name := q.Name()
	d := confirmManyData{
		Queue: name, Action: a, IDs: idsText(ids), State: state,
		PostURL: base + queuePath(name, "") + "/" + a.Name, BackURL: base + queuePath(name, state),
		Disabled: !h.cfg.Actions,
	}
	for _, id := range ids {
		d.Jobs = append(d.Jobs, actionLink{Label: strconv.FormatInt(id, 10), URL: base + jobPath(name, id)})
	}
	status := http.StatusOK
	if h.cfg.Actions {
		d.Token = h.tokens.issue(a.Name, name, d.IDs, now)
	} else {
		status = http.StatusForbidden
	}
	p := h.newPage(seg, fmt.Sprintf("%s %s?", a.Verb, jobsCount(len(ids))), now)
	p.Crumbs = []crumb{{Label: name, URL: d.BackURL}, {Label: a.Verb}}
	p.RefreshMS = 0
	p.Data = d
	h.render(w, r, status, "confirmmany", p)
}

// actMany performs a confirmed action on several jobs and redirects to the
// queue page it came from.
func (h *Handler) actMany(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, a action) {
	ids, err := parseIDs(r.PostForm.Get("ids"), maxPageSize)
	if err != nil {
		h.errorPage(w, r, seg, http.StatusBadRequest, "Bad request", "The jobs to "+a.Name+" are not a list of job ids: "+err.Error()+".")
		return
	}
	if !h.allowAction(w, r, seg, q.Name(), a, idsText(ids)) {
		return
	}
	n, ok := h.perform(w, r, seg, q, a, ids...)
	if !ok {
		return
	}
	state := r.PostForm.Get("state")
	if !validState(state) {
		state = ""
	}
	v := url.Values{"done": {a.Name}, "changed": {strconv.FormatInt(n, 10)}, "of": {strconv.Itoa(len(ids))}}
	if state != "" {
		v.Set("state", state)
	}
	seeOther(w, baseOf(seg)+queuePath(q.Name(), "")+"?"+v.Encode(), http.StatusSeeOther)
}

// flashMany reads the ?done=&changed=&of= of a redirect after an action on
// several jobs. The message is built from fixed text and numbers.
func flashMany(r *http.Request) *flash {
	q := r.URL.Query()
	a, ok := actions[q.Get("done")]
	if !ok {
		return nil
	}
	changed, err1 := strconv.ParseInt(q.Get("changed"), 10, 64)
	of, err2 := strconv.ParseInt(q.Get("of"), 10, 64)
	if err1 != nil || err2 != nil || changed < 0 || of < changed {
		return nil
	}
	msg := fmt.Sprintf("%s %d of %s.", capitalize(a.PastMany), changed, jobsCount(int(of)))
	if changed < of {
		msg += fmt.Sprintf(" The others were not in a state that %s applies to.", a.Name)
	}
	return &flash{OK: changed > 0, Message: msg}
}

// bulkLinks are a queue page's links to act on all of its jobs that an
// action applies to.
func bulkLinks(base, queue, state string, recs []*skipjack.Record[json.RawMessage], now time.Time, browse bool) []actionLink {
	var links []actionLink
	for _, name := range actionOrder {
		a := actions[name]
		if a.browser && !browse {
			continue
		}
		var ids []int64
		for _, rec := range recs {
			if a.applies(rec, now) {
				ids = append(ids, rec.ID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		v := url.Values{"ids": {idsText(ids)}}
		if state != "" {
			v.Set("state", state)
		}
		links = append(links, actionLink{
			Label: fmt.Sprintf("%s %s on this page…", a.Verb, jobsCount(len(ids))),
			URL:   base + queuePath(queue, "") + "/" + a.Name + "?" + v.Encode(),
		})
	}
	return links
}

// jobsCount says "1 job" or "3 jobs".
func jobsCount(n int) string {
	if n == 1 {
		return "1 job"
	}
	return strconv.Itoa(n) + " jobs"
}

// capitalize upper-cases the first letter of an ASCII word.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
