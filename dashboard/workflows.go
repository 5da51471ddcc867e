package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// routeWorkflows serves /workflows and /workflows/{id}.
func (h *Handler) routeWorkflows(w http.ResponseWriter, r *http.Request, seg []string) {
	if !h.allow(w, r, http.MethodGet) {
		return
	}
	if len(seg) == 1 {
		h.workflowsPage(w, r, seg)
		return
	}
	id, err := strconv.ParseInt(seg[1], 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != seg[1] {
		h.notFound(w, r, seg, "A workflow id is a positive whole number.")
		return
	}
	h.workflowPage(w, r, seg, id)
}

// workflowRow is one line of the workflows page.
type workflowRow struct {
	skipjack.WorkflowSummary
	URL string
}

// workflowsData is the workflows page's model.
type workflowsData struct {
	// Names are the workflows the dashboard shows, Name the one selected
	// (?name=, "" for all) and State the state selected.
	Names       []string
	Name, State string
	// NameTabs and StateTabs select a name and a state.
	NameTabs, StateTabs []workflowTab
	Rows                []workflowRow
	Cursor              cursor
	// NewerURL and OlderURL page the list both ways, FirstURL back to
	// the newest workflows.
	NewerURL, OlderURL, FirstURL string
}

// workflowTab is one link of a workflows page's filters.
type workflowTab struct {
	Label, URL string
	Current    bool
}

// workflowStates are the states the workflows page filters by.
var workflowStates = []string{skipjack.WorkflowRunning, skipjack.WorkflowCompleted, skipjack.WorkflowFailed}

// workflowsPage lists the workflows of every WorkflowAdmin (or the one
// ?name= selects), newest first, a page at a time: each admin's page is
// read with one look-ahead row and the pages are merged by id.
func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request, seg []string) {
	q := r.URL.Query()
	d := workflowsData{Name: q.Get("name"), State: q.Get("state")}
	flows := h.flows
	for _, f := range h.flows {
		d.Names = append(d.Names, f.Name())
	}
	if d.Name != "" {
		i := slices.Index(d.Names, d.Name)
		if i < 0 {
			h.notFound(w, r, seg, fmt.Sprintf("There is no workflow named %q.", d.Name))
			return
		}
		flows = h.flows[i : i+1]
	}
	if d.State != "" && !slices.Contains(workflowStates, d.State) {
		h.notFound(w, r, seg, fmt.Sprintf("There is no workflow state %q.", d.State))
		return
	}
	for key, into := range map[string]*int64{"before": &d.Cursor.Before, "after": &d.Cursor.After} {
		if v := q.Get(key); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				h.notFound(w, r, seg, fmt.Sprintf("?%s= takes a workflow id.", key))
				return
			}
			*into = n
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	size := h.cfg.PageSize
	p := skipjack.WorkflowListParams{State: d.State, BeforeID: d.Cursor.Before, AfterID: d.Cursor.After, Limit: size + 1}
	var all []skipjack.WorkflowSummary
	for _, f := range flows {
		ws, err := f.List(ctx, p)
		if err != nil {
			h.serverError(w, r, seg, h.failed(ctx, "list workflows", f.Name(), err))
			return
		}
		all = append(all, ws...)
	}
	// Newest first, or, towards newer workflows, the oldest page above
	// the cursor (then shown newest first).
	newer := d.Cursor.After > 0
	slices.SortFunc(all, func(a, b skipjack.WorkflowSummary) int {
		if newer {
			return cmp.Compare(a.ID, b.ID)
		}
		return cmp.Compare(b.ID, a.ID)
	})
	more := len(all) > size
	all = all[:min(len(all), size)]
	if newer {
		slices.Reverse(all)
	}
	base := baseOf(seg)
	for _, s := range all {
		d.Rows = append(d.Rows, workflowRow{WorkflowSummary: s, URL: base + workflowPath(s.ID)})
	}
	if len(d.Rows) > 0 {
		first, last := d.Rows[0].ID, d.Rows[len(d.Rows)-1].ID
		if more || d.Cursor.After > 0 {
			d.OlderURL = base + workflowsPath(d.Name, d.State, cursor{Before: last})
		}
		if (newer && more) || d.Cursor.Before > 0 {
			d.NewerURL = base + workflowsPath(d.Name, d.State, cursor{After: first})
		}
	}
	for _, n := range append([]string{""}, d.Names...) {
		d.NameTabs = append(d.NameTabs, workflowTab{Label: cmp.Or(n, "All"), URL: base + workflowsPath(n, d.State, cursor{}), Current: n == d.Name})
	}
	for _, st := range append([]string{""}, workflowStates...) {
		d.StateTabs = append(d.StateTabs, workflowTab{Label: cmp.Or(st, "All states"), URL: base + workflowsPath(d.Name, st, cursor{}), Current: st == d.State})
	}
	if d.Cursor != (cursor{}) {
		d.FirstURL = base + workflowsPath(d.Name, d.State, cursor{})
	}
	pg := h.newPage(seg, "Workflows", h.now())
	pg.Crumbs = []crumb{{Label: "Workflows"}}
	pg.Data = d
	h.render(w, r, http.StatusOK, "workflows", pg)
}

// stepRow is one step of a workflow page.
type stepRow struct {
	Name, Queue, State, Error string
	After                     []string
	JobID                     int64
	// JobURL is the step's job page, "" when the dashboard does not show
	// its queue.
	JobURL string
}

// workflowData is a workflow page's model.
type workflowData struct {
	Rec   *skipjack.WorkflowRecord
	Steps []stepRow
	Graph workflowGraph
	// ListURL is the workflows page of this workflow's name.
	ListURL string
}

// workflowPage serves one workflow: its steps as a graph and a table.
func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request, seg []string, id int64) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.QueryTimeout)
	defer cancel()
	rec, f, err := h.findWorkflow(ctx, id)
	switch {
	case errors.Is(err, skipjack.ErrWorkflowNotFound):
		h.notFound(w, r, seg, fmt.Sprintf("There is no workflow %d.", id))
		return
	case err != nil:
		h.serverError(w, r, seg, h.failed(ctx, "get workflow", strconv.FormatInt(id, 10), err))
		return
	}
	base := baseOf(seg)
	d := workflowData{Rec: rec, ListURL: base + workflowsPath(rec.Name, "", cursor{})}
	for _, st := range f.Steps() {
		s := rec.Steps[st.Name]
		row := stepRow{Name: st.Name, Queue: st.Queue, State: s.State, Error: s.Error, After: st.After, JobID: s.JobID}
		if _, ok := h.queues[st.Queue]; ok && s.JobID != 0 {
			row.JobURL = base + jobPath(st.Queue, s.JobID)
		}
		d.Steps = append(d.Steps, row)
	}
	d.Graph = layoutWorkflow(d.Steps)
	pg := h.newPage(seg, fmt.Sprintf("Workflow %d", id), h.now())
	pg.Crumbs = []crumb{{Label: "Workflows", URL: base + workflowsPath("", "", cursor{})}, {Label: rec.Name, URL: d.ListURL}, {Label: fmt.Sprintf("Workflow %d", id)}}
	pg.Data = d
	h.render(w, r, http.StatusOK, "workflow", pg)
}

// findWorkflow reads the workflow with id from the first WorkflowAdmin
// that has it: workflow ids are unique in a schema, and an admin answers
// ErrWorkflowNotFound for a workflow of another name.
func (h *Handler) findWorkflow(ctx context.Context, id int64) (*skipjack.WorkflowRecord, skipjack.WorkflowAdmin, error) {
	for _, f := range h.flows {
		rec, err := f.Get(ctx, id)
		if errors.Is(err, skipjack.ErrWorkflowNotFound) {
			continue
		}
		return rec, f, err
	}
	return nil, nil, skipjack.ErrWorkflowNotFound
}

// jobWorkflow returns the id of the workflow whose step is the job of
// queue, or 0.
func (h *Handler) jobWorkflow(ctx context.Context, queue string, id int64) (int64, error) {
	for _, f := range h.flows {
		wf, err := f.JobWorkflow(ctx, queue, id)
		if err != nil || wf != 0 {
			return wf, err
		}
	}
	return 0, nil
}

// workflowPath is the path of a workflow page, relative to the mount
// point.
func workflowPath(id int64) string {
	return "workflows/" + strconv.FormatInt(id, 10)
}

// workflowsPath is the path of a page of the workflows list.
func workflowsPath(name, state string, c cursor) string {
	var q []string
	if name != "" {
		q = append(q, "name="+url.QueryEscape(name))
	}
	if state != "" {
		q = append(q, "state="+url.QueryEscape(state))
	}
	q = append(q, c.query()...)
	if len(q) == 0 {
		return "workflows"
	}
	return "workflows?" + strings.Join(q, "&")
}
