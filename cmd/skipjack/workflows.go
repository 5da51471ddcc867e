package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// workflowsCommands are skipjack workflows list|show: the workflows the
// YAML declares, read with the runtime's own Get from the YAML alone.
var workflowsCommands = []command{
	{
		name: "workflows list", synopsis: "[--name NAME] [--state STATE] [--limit N] [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "list workflows, newest first", database: true, json: true,
		flags: workflowListFlags, args: workflowListArgs, run: workflowsList,
	},
	{
		name: "workflows show", synopsis: "ID [--json] [-f skipjack.yaml] [--database-url URL]",
		summary: "show a workflow and its steps, with their jobs and errors", database: true, json: true,
		args: workflowShowArgs, run: workflowsShow,
	},
}

// workflowStates are the states of a workflow.
var workflowStates = []string{skipjack.WorkflowRunning, skipjack.WorkflowCompleted, skipjack.WorkflowFailed}

// workflowListFlags adds the flags of workflows list.
func workflowListFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.workflow, "name", "", "only workflows named `NAME` in the YAML")
	fs.StringVar(&o.state, "state", "", "only workflows in `STATE` ("+strings.Join(workflowStates, ", ")+")")
	fs.IntVar(&o.limit, "limit", defaultLimit, "at most `N` workflows (up to 1000)")
}

// workflowListArgs checks the flags of workflows list, which takes no
// positional arguments.
func workflowListArgs(o *options, args []string) error {
	switch {
	case len(args) > 0:
		return fmt.Errorf("unexpected arguments %q", args)
	case o.limit < 1 || o.limit > 1000:
		return fmt.Errorf("--limit %d is not between 1 and 1000", o.limit)
	case o.state != "" && !slices.Contains(workflowStates, o.state):
		return fmt.Errorf("--state %q is not one of %s", o.state, strings.Join(workflowStates, ", "))
	}
	return nil
}

// workflowShowArgs parses the one ID of workflows show.
func workflowShowArgs(o *options, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("missing workflow ID")
	case len(args) > 1:
		return fmt.Errorf("unexpected arguments %q", args[1:])
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("workflow ID %q is not a positive integer", args[0])
	}
	o.ids = []int64{id}
	return nil
}

// workflowJSON is one workflow as workflows list and show print it with
// --json.
type workflowJSON struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	State     string     `json:"state"`
	CreatedAt time.Time  `json:"created_at"`
	Steps     []stepJSON `json:"steps"`
}

// stepJSON is one step of a workflowJSON, in YAML order.
type stepJSON struct {
	Name  string   `json:"name"`
	Queue string   `json:"queue"`
	JobID int64    `json:"job_id"`
	State string   `json:"state"`
	Error string   `json:"error"`
	After []string `json:"after"`
}

// workflowReader reads the workflows of one config.
type workflowReader struct {
	db   *pgxpool.Pool
	sqls map[string]*generator.WorkflowSQL
	// table and steps are the workflows and steps tables of the
	// config's schema.
	table, steps string
}

// withWorkflows loads o's config, connects to o's database and calls f
// with a reader of the config's workflows. A config that declares none
// is reported before connecting.
func withWorkflows(o options, f func(ctx context.Context, r *workflowReader) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(o.file)
	if err != nil {
		return err
	}
	sqls := generator.WorkflowSQLs(cfg)
	if len(sqls) == 0 {
		return fmt.Errorf("%s declares no workflows", o.file)
	}
	r := &workflowReader{sqls: make(map[string]*generator.WorkflowSQL, len(sqls)), table: sqls[0].Workflows, steps: sqls[0].Steps}
	names := make([]string, len(sqls))
	for i := range sqls {
		r.sqls[sqls[i].Name] = &sqls[i]
		names[i] = sqls[i].Name
	}
	if o.workflow != "" && r.sqls[o.workflow] == nil {
		return fmt.Errorf("--name: unknown workflow %q%s", o.workflow, config.DidYouMean(o.workflow, names))
	}
	pool, err := connect(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	r.db = pool
	err = f(ctx, r)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return fmt.Errorf("a workflow table does not exist; apply the migrations first (skipjack migrate): %w", err)
	}
	return explainPooler(err)
}

// errNoWorkflow is the failure of an id that names no workflow.
func errNoWorkflow(id int64) error { return fmt.Errorf("no workflow with id %d", id) }

// get reads the workflow with the given id with the runtime's
// GetWorkflow, its steps in YAML order.
func (r *workflowReader) get(ctx context.Context, id int64) (*workflowJSON, error) {
	var name string
	err := r.db.QueryRow(ctx, `SELECT "name" FROM `+r.table+` WHERE "id" = $1`, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoWorkflow(id)
	}
	if err != nil {
		return nil, fmt.Errorf("workflow %d: %w", id, err)
	}
	w := r.sqls[name]
	if w == nil {
		return nil, fmt.Errorf("workflow %d is a %s, which the YAML does not declare", id, name)
	}
	rec, err := skipjackimpl.NewWorkflowAdmin(r.db, workflowSpec(w)).Get(ctx, id)
	if errors.Is(err, skipjack.ErrWorkflowNotFound) {
		return nil, errNoWorkflow(id) // deleted since
	}
	if err != nil {
		return nil, err
	}
	out := &workflowJSON{ID: rec.ID, Name: rec.Name, State: rec.State, CreatedAt: rec.CreatedAt, Steps: []stepJSON{}}
	for _, st := range w.StepSQLs {
		s := rec.Steps[st.Name]
		after := st.After
		if after == nil {
			after = []string{}
		}
		out.Steps = append(out.Steps, stepJSON{Name: st.Name, Queue: s.Queue, JobID: s.JobID, State: s.State, Error: s.Error, After: after})
	}
	return out, nil
}

// list returns the ids of the newest workflows of o's selection, with
// the runtime's ListWorkflows (what the dashboard lists them with).
func (r *workflowReader) list(ctx context.Context, o options) ([]int64, error) {
	ws, err := skipjackimpl.ListWorkflows(ctx, r.db, r.table, r.steps, o.workflow, skipjack.WorkflowListParams{State: o.state, Limit: o.limit})
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	return ids, nil
}

// workflowSpec returns the runtime's description of w, as its generated
// package declares it (without the queues' Cancel, which only Cancel uses).
func workflowSpec(w *generator.WorkflowSQL) *skipjackimpl.WorkflowSpec {
	spec := &skipjackimpl.WorkflowSpec{Name: w.Name, Workflows: w.Workflows, Steps: w.Steps, Start: w.Start}
	for _, i := range w.Order {
		st := w.StepSQLs[i]
		spec.StepSpecs = append(spec.StepSpecs, skipjackimpl.WorkflowStep{Name: st.Name, Queue: st.Queue, Table: st.Table, After: st.After})
	}
	return spec
}

// workflowAdmins returns the operations view of each workflow of cfg on
// db, in YAML order, for the dashboard that ui serves.
func workflowAdmins(cfg *config.Config, db skipjackimpl.DBTX) []skipjack.WorkflowAdmin {
	sqls := generator.WorkflowSQLs(cfg)
	out := make([]skipjack.WorkflowAdmin, len(sqls))
	for i := range sqls {
		out[i] = skipjackimpl.NewWorkflowAdmin(db, workflowSpec(&sqls[i]))
	}
	return out
}

// workflowsList prints the newest workflows, one line each.
func workflowsList(o options, e env) error {
	var found []*workflowJSON
	err := withWorkflows(o, func(ctx context.Context, r *workflowReader) error {
		ids, err := r.list(ctx, o)
		if err != nil {
			return err
		}
		for _, id := range ids {
			w, err := r.get(ctx, id)
			if err != nil {
				return err
			}
			found = append(found, w)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		if found == nil {
			found = []*workflowJSON{}
		}
		return printWorkflowsJSON(e, found)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-10s  %-20s  %-9s  %-5s  %s\n", "ID", "NAME", "STATE", "STEPS", "CREATED AT")
	for _, w := range found {
		done := 0
		for _, s := range w.Steps {
			if s.State == "completed" || s.State == "failed" {
				done++
			}
		}
		fmt.Fprintf(&b, "%-10d  %-20s  %-9s  %-5s  %s\n", w.ID, w.Name, w.State,
			fmt.Sprintf("%d/%d", done, len(w.Steps)), w.CreatedAt.Format(time.RFC3339))
	}
	_, err = e.stdout.Write(b.Bytes())
	if err == nil && len(found) >= o.limit {
		fmt.Fprintf(e.stderr, "more workflows may follow: pass a larger --limit\n")
	}
	return err
}

// workflowsShow prints one workflow with its steps in YAML order.
func workflowsShow(o options, e env) error {
	var w *workflowJSON
	err := withWorkflows(o, func(ctx context.Context, r *workflowReader) error {
		var err error
		w, err = r.get(ctx, o.ids[0])
		return err
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		raw, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("print the workflow: %w", err)
		}
		return printJSON(e, raw)
	}
	var b bytes.Buffer
	writeWorkflow(&b, w)
	_, err = e.stdout.Write(b.Bytes())
	return err
}

// printWorkflowsJSON prints workflows as a JSON array.
func printWorkflowsJSON(e env, ws []*workflowJSON) error {
	raw, err := json.Marshal(ws)
	if err != nil {
		return fmt.Errorf("print the workflows: %w", err)
	}
	return printJSON(e, raw)
}

// writeWorkflow writes one workflow as workflows show prints it: its
// fields, then a table of its steps in YAML order.
func writeWorkflow(b *bytes.Buffer, w *workflowJSON) {
	fmt.Fprintf(b, "workflow %d of %s\n", w.ID, w.Name)
	fmt.Fprintf(b, "  %-12s %s\n", "state", w.State)
	fmt.Fprintf(b, "  %-12s %s\n", "created at", w.CreatedAt.Format(time.RFC3339))
	rows := [][]string{{"STEP", "QUEUE", "JOB", "STATE", "AFTER", "ERROR"}}
	for _, s := range w.Steps {
		rows = append(rows, []string{s.Name, s.Queue, strconv.FormatInt(s.JobID, 10), s.State, strings.Join(s.After, ","), oneLine(s.Error, 200)})
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	b.WriteString("  steps\n")
	for _, r := range rows {
		line := "   "
		for i, c := range r {
			line += " " + c
			if i < len(r)-1 {
				line += strings.Repeat(" ", width[i]-len([]rune(c))+1)
			}
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}
