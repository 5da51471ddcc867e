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
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

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
	// WorkflowID is the workflow the job is a step of (0 for none),
	// WorkflowURL its page, and WorkflowErr why it could not be read.
	WorkflowID  int64
	WorkflowURL string
	WorkflowErr string
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
	if len(h.flows) > 0 {
		wf, err := h.jobWorkflow(ctx, d.Queue, id)
		switch {
		case err != nil:
			d.WorkflowErr = h.failed(ctx, "workflow of job", d.Queue, err)
		case wf != 0:
			d.WorkflowID, d.WorkflowURL = wf, base+workflowPath(wf)
		}
	}
	if h.cfg.Actions {
		for _, name := range actionOrder {
			if a := actions[name]; a.offered(q) && a.applies(rec, now) {
				d.Actions = append(d.Actions, actionLink{Label: a.Verb + "…", URL: base + jobPath(d.Queue, id) + "/" + a.Name})
			}
		}
	}
	p := h.newPage(seg, fmt.Sprintf("Job %d", id), now)
	p.Crumbs = []crumb{{Label: d.Queue, URL: base + queuePath(d.Queue, "")}, {Label: fmt.Sprintf("Job %d", id)}}
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

// jobPath is the path of a job page, relative to the mount point.
func jobPath(queue string, id int64) string {
	return "queues/" + url.PathEscape(queue) + "/jobs/" + strconv.FormatInt(id, 10)
}
