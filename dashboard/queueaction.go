package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// queueAction is an operation on a whole queue that an operator confirms
// first: pause or resume.
type queueAction struct {
	// Name is the action's path segment and token label.
	Name string
	// Verb labels the buttons; Past the result.
	Verb, Past string
	// Explain says on the confirmation page what the action does.
	Explain string
	// do performs the action.
	do func(ctx context.Context, q skipjack.QueueAdmin) error
}

// queueActions are the queue actions by name.
var queueActions = map[string]queueAction{
	"pause": {
		Name: "pause", Verb: "Pause", Past: "paused: no worker claims its jobs until it is resumed",
		Explain: "No worker of any process claims the queue's jobs until it is resumed. Jobs stay pending, enqueueing still works, and jobs already running finish.",
		do:      func(ctx context.Context, q skipjack.QueueAdmin) error { return q.Pause(ctx) },
	},
	"resume": {
		Name: "resume", Verb: "Resume", Past: "resumed: workers claim its jobs again",
		Explain: "Workers claim the queue's jobs again, starting with those that waited longest.",
		do:      func(ctx context.Context, q skipjack.QueueAdmin) error { return q.Resume(ctx) },
	},
}

// toggleFor returns the link that pauses or resumes a queue, as its state
// calls for.
func toggleFor(base, queue string, paused bool) actionLink {
	a := queueActions["pause"]
	if paused {
		a = queueActions["resume"]
	}
	return actionLink{Label: a.Verb + " queue…", URL: base + queuePath(queue, "") + "/" + a.Name}
}

// confirmQueueData is the model of the page that confirms a queue action.
type confirmQueueData struct {
	Queue    string
	Action   queueAction
	Paused   bool
	Token    string
	PostURL  string
	BackURL  string
	Disabled bool
}

// confirmQueuePage asks before pausing or resuming a queue.
func (h *Handler) confirmQueuePage(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, a queueAction) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	now := h.now()
	base := baseOf(seg)
	name := q.Name()
	st, err := q.Stats(ctx)
	if err != nil {
		h.serverError(w, r, seg, h.failed(ctx, "stats", name, err))
		return
	}
	d := confirmQueueData{
		Queue: name, Action: a, Paused: st.Paused, Disabled: !h.cfg.Actions,
		PostURL: base + queuePath(name, "") + "/" + a.Name, BackURL: base + queuePath(name, ""),
	}
	status := http.StatusOK
	if h.cfg.Actions {
		d.Token = h.tokens.issue(a.Name, name, "", now)
	} else {
		status = http.StatusForbidden
	}
	p := h.newPage(seg, fmt.Sprintf("%s queue %s?", a.Verb, name), now)
	p.Crumbs = []crumb{{Label: name, URL: d.BackURL}, {Label: a.Verb}}
	p.RefreshMS = 0
	p.Data = d
	h.render(w, r, status, "confirmqueue", p)
}

// actQueue performs a confirmed queue action and redirects to the queue
// page.
func (h *Handler) actQueue(w http.ResponseWriter, r *http.Request, seg []string, q skipjack.QueueAdmin, a queueAction) {
	if !h.allowAction(w, r, seg, q.Name(), action{Name: a.Name}, "") {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	if err := a.do(ctx, q); err != nil {
		h.serverError(w, r, seg, h.failed(ctx, a.Name, q.Name(), err))
		return
	}
	h.log.InfoContext(ctx, "dashboard: "+a.Name, "queue", q.Name())
	seeOther(w, baseOf(seg)+queuePath(q.Name(), "")+"?"+url.Values{"queue": {a.Name}}.Encode(), http.StatusSeeOther)
}

// flashQueue reads the ?queue= of the redirect after a queue action.
func flashQueue(r *http.Request, queue string) *flash {
	a, ok := queueActions[r.URL.Query().Get("queue")]
	if !ok {
		return nil
	}
	return &flash{OK: true, Message: fmt.Sprintf("Queue %s %s.", queue, a.Past)}
}
