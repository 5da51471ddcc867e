package generator

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
	"github.com/skipjack-dev/skipjack/templates"
)

// workflowQueues returns the names of the queues cfg's workflows use,
// sorted and without repeats.
func workflowQueues(cfg *config.Config) []string {
	var names []string
	for _, wf := range cfg.Workflows {
		for _, st := range wf.Steps {
			names = append(names, st.Queue)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// workflowSteps returns the migration steps that bring the workflow
// objects from last to want: the per-schema tables and functions (shared,
// which come before every table step, as the other per-schema tables do)
// and the triggers of the queue tables that workflows start or stop using
// (steps, after the tables' own). prev are last's tables by name: a
// trigger on one of them changes a live table, which takes a lock.
func workflowSteps(schemaName string, last *state, want state, prev map[string]schema.Table) (shared, steps []tableStep, changes []string) {
	had := len(last.WorkflowQueues) > 0
	if len(want.WorkflowQueues) > 0 && !had {
		shared = append(shared, tableStep{"", schema.Step{
			Up:   []string{strings.TrimSuffix(schema.CreateWorkflows(schemaName), "\n")},
			Down: []string{strings.TrimSuffix(schema.DropWorkflows(schemaName), "\n")},
		}})
	}
	tables := make(map[string]schema.Table, len(want.Tables))
	for _, t := range want.Tables {
		tables[t.Name] = t
	}
	for _, name := range want.WorkflowQueues {
		if slices.Contains(last.WorkflowQueues, name) {
			continue
		}
		t := tables[name]
		live := ""
		if _, ok := prev[name]; ok {
			live = name
			changes = append(changes, "workflow_"+name)
		}
		steps = append(steps, tableStep{live, schema.Step{
			Up:   []string{strings.TrimSuffix(schema.CreateWorkflowTriggers(t), "\n")},
			Down: []string{strings.TrimSuffix(schema.DropWorkflowTriggers(t), "\n")},
		}})
	}
	for _, name := range last.WorkflowQueues {
		t, ok := tables[name]
		if !ok || slices.Contains(want.WorkflowQueues, name) {
			continue // dropped with its table, or still used
		}
		steps = append(steps, tableStep{name, schema.Step{
			Up:   []string{strings.TrimSuffix(schema.DropWorkflowTriggers(t), "\n")},
			Down: []string{strings.TrimSuffix(schema.CreateWorkflowTriggers(t), "\n")},
		}})
		changes = append(changes, "unworkflow_"+name)
	}
	if had && len(want.WorkflowQueues) == 0 {
		steps = append(steps, tableStep{"", schema.Step{
			Up:   []string{strings.TrimSuffix(schema.DropWorkflows(schemaName), "\n")},
			Down: []string{strings.TrimSuffix(schema.CreateWorkflows(schemaName), "\n")},
		}})
	}
	return shared, steps, changes
}

// workflowFile builds the template model of wf's workflow.go.
func (g *gen) workflowFile(wf *config.Workflow, tables map[string]schema.Table) templates.WorkflowFile {
	im := newImports("Name", "DBTX", "Steps", "StepOutputs", "spec", "Start", "Get", "Cancel", "Admin", "Outputs")
	im.use("context", "context")
	im.taken["skipjack"] = true
	im.useNamed(runtimeImport, "skipjack")
	im.use(runtimeImport+"/skipjackimpl", "skipjackimpl")
	queues := make(map[string]*config.Queue)
	for i := range g.cfg.Queues {
		queues[g.cfg.Queues[i].Name] = &g.cfg.Queues[i]
	}
	f := templates.WorkflowFile{
		Package:    wf.Package,
		Workflow:   wf.Name,
		Workflows:  strconv.Quote(schema.Workflows(g.cfg.Schema)),
		StepsTable: strconv.Quote(schema.Steps(g.cfg.Schema)),
	}
	for _, st := range topoSteps(wf.Steps) {
		q := queues[st.Queue]
		s := templates.WorkflowStep{
			Name:            st.Name,
			Field:           st.GoName,
			Queue:           st.Queue,
			Pkg:             im.use(path.Join(g.outImport, q.Package), q.Package),
			Table:           strconv.Quote(tables[st.Queue].QualifiedName()),
			After:           strings.Join(st.After, " and "),
			AfterList:       goStrings(st.After),
			MaxPayloadBytes: q.MaxPayloadBytes,
		}
		f.Steps = append(f.Steps, s)
		if len(q.Output) > 0 {
			f.Outputs = append(f.Outputs, s)
		}
	}
	f.Start = "`" + startSQL(g.cfg.Schema, wf, topoSteps(wf.Steps), tables) + "`"
	f.StdImports, f.OtherImports = im.split()
	return f
}

// goStrings returns the Go literal of a []string, or "" when it is empty.
func goStrings(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[]string{" + strings.Join(q, ", ") + "}"
}

// topoSteps returns steps ordered so that every step comes after the
// steps it runs after, keeping file order otherwise.
func topoSteps(steps []config.Step) []config.Step {
	done := make(map[string]bool, len(steps))
	var out []config.Step
	for len(out) < len(steps) {
		for _, st := range steps {
			if done[st.Name] {
				continue
			}
			ready := true
			for _, a := range st.After {
				ready = ready && done[a]
			}
			if ready {
				done[st.Name] = true
				out = append(out, st)
			}
		}
	}
	return out
}

// startSQL returns the statement that starts wf: one INSERT per step's job
// ($1, $2, ... are the payloads in steps' order), due now for a step that
// runs after nothing and at infinity (waiting) for the others, the
// workflow's row, and the steps' rows with their counters of upstream
// steps.
func startSQL(schemaName string, wf *config.Workflow, steps []config.Step, tables map[string]schema.Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "WITH \"workflow\" AS (\n    INSERT INTO %s (\"name\") VALUES (%s) RETURNING \"id\"\n)", schema.Workflows(schemaName), schema.QuoteLiteral(wf.Name))
	for i, st := range steps {
		runAt := "now()"
		if len(st.After) > 0 {
			runAt = schema.Waiting
		}
		fmt.Fprintf(&b, ", %s AS (\n    INSERT INTO %s (\"payload\", \"run_at\") VALUES ($%d::text::jsonb, %s) RETURNING \"id\"\n)",
			schema.QuoteIdent("step_"+st.Name), tables[st.Queue].QualifiedName(), i+1, runAt)
	}
	fmt.Fprintf(&b, ", \"steps\" AS (\n    INSERT INTO %s (\"workflow_id\", \"step\", \"queue\", \"job_id\", \"after\", \"run_on_failure\", \"channel\", \"waiting\", \"state\")", schema.Steps(schemaName))
	for i, st := range steps {
		if i > 0 {
			b.WriteString("\n    UNION ALL")
		}
		after := make([]string, len(st.After))
		for j, a := range st.After {
			after[j] = schema.QuoteLiteral(a)
		}
		channel := "NULL"
		if ch := tables[st.Queue].Channel(); ch != "" {
			channel = schema.QuoteLiteral(ch)
		}
		state := "'ready'"
		if len(st.After) > 0 {
			state = "'waiting'"
		}
		fmt.Fprintf(&b, "\n    SELECT w.\"id\", %s, %s, j.\"id\", ARRAY[%s]::text[], %t, %s, %d, %s FROM \"workflow\" AS w, %s AS j",
			schema.QuoteLiteral(st.Name), schema.QuoteLiteral(st.Queue), strings.Join(after, ", "), st.RunOnUpstreamFailure, channel, len(st.After), state, schema.QuoteIdent("step_"+st.Name))
	}
	b.WriteString("\n)\nSELECT \"id\" FROM \"workflow\"")
	return b.String()
}

// workflowSettings returns the Spec field of a queue q (table t) that a
// workflow uses; nil for the others, whose Spec stays as it was.
func (g *gen) workflowSettings(q *config.Queue, t schema.Table) []setting {
	if !slices.Contains(workflowQueues(g.cfg), q.Name) {
		return nil
	}
	return []setting{{"Workflow", fmt.Sprintf("&skipjackimpl.WorkflowTables{Workflows: %s, Steps: %s, Table: %s}", strconv.Quote(schema.Workflows(g.cfg.Schema)), strconv.Quote(schema.Steps(g.cfg.Schema)), strconv.Quote(t.QualifiedName()))}}
}
