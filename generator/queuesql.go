package generator

import (
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/queries"
	"github.com/skipjack-dev/skipjack/schema"
)

// QueueSQL is the SQL of one live queue as its generated package runs it:
// the sqlc query file that generate hands to sqlc, rendered from the same
// model, without running sqlc or consulting any Go module. The CLI's
// stats, jobs and ui run these queries directly on the queue's table, so
// they need neither the generated code nor a Go toolchain.
type QueueSQL struct {
	// Name is the queue's name in the YAML.
	Name string
	// Table is the queue's quoted, schema-qualified table.
	Table string
	// Queries is the sqlc query file: "-- name: Name :kind" sections whose
	// parameters are written sqlc.arg(name).
	Queries string
	// Schedules are the queue's periodic jobs, as the YAML declares them.
	Schedules []config.Schedule
	// Unique is the queue's unique key, or nil.
	Unique *config.Unique
	// Channel is the queue's NOTIFY channel, or "" with notify: false.
	Channel string
	// Limits and Serial are the queue's flow control, or nil.
	Limits *config.Limits
	Serial *config.Serial
}

// QueueSQLs returns the SQL of every live queue of cfg, in YAML order.
func QueueSQLs(cfg *config.Config) ([]QueueSQL, error) {
	m := buildModel(cfg)
	out := make([]QueueSQL, 0, len(m.queues))
	for _, qm := range m.queues {
		text, err := queries.Render(qm.queries)
		if err != nil {
			return nil, err
		}
		out = append(out, QueueSQL{Name: qm.cfg.Name, Table: qm.table.QualifiedName(), Queries: text, Schedules: qm.cfg.Schedule, Unique: qm.cfg.Unique, Channel: qm.table.Channel(), Limits: qm.cfg.Limits, Serial: qm.cfg.Serial})
	}
	return out, nil
}

// WorkflowSQL is the SQL of one workflow as its generated package runs it,
// for the CLI's workflows commands, which read workflows without the
// generated code.
type WorkflowSQL struct {
	// Name is the workflow's name in the YAML.
	Name string
	// Workflows and Steps are the schema's workflows and steps tables,
	// quoted and schema-qualified.
	Workflows, Steps string
	// Start is the statement that starts the workflow, taking the steps'
	// encoded payloads in Order's order and returning the workflow's id.
	Start string
	// Order are the indexes into Steps of the steps, upstream steps
	// before the steps that run after them: the order of Start's
	// parameters and of the runtime's WorkflowSpec.StepSpecs.
	Order []int
	// StepSQLs are the workflow's steps in YAML order.
	StepSQLs []WorkflowStepSQL
}

// WorkflowStepSQL is one step of a WorkflowSQL.
type WorkflowStepSQL struct {
	// Name is the step's name, Queue its queue's name in the YAML.
	Name, Queue string
	// Table is the queue's quoted, schema-qualified table.
	Table string
	// After are the steps it runs after, as written.
	After []string
}

// WorkflowSQLs returns the SQL of every workflow of cfg, in YAML order.
func WorkflowSQLs(cfg *config.Config) []WorkflowSQL {
	m := buildModel(cfg)
	tables := make(map[string]schema.Table, len(m.queues))
	for _, qm := range m.queues {
		tables[qm.cfg.Name] = qm.table
	}
	out := make([]WorkflowSQL, 0, len(cfg.Workflows))
	for i := range cfg.Workflows {
		wf := &cfg.Workflows[i]
		w := WorkflowSQL{Name: wf.Name, Workflows: schema.Workflows(cfg.Schema), Steps: schema.Steps(cfg.Schema)}
		index := make(map[string]int, len(wf.Steps))
		for j, st := range wf.Steps {
			index[st.Name] = j
			w.StepSQLs = append(w.StepSQLs, WorkflowStepSQL{Name: st.Name, Queue: st.Queue, Table: tables[st.Queue].QualifiedName(), After: st.After})
		}
		topo := topoSteps(wf.Steps)
		for _, st := range topo {
			w.Order = append(w.Order, index[st.Name])
		}
		w.Start = startSQL(cfg.Schema, wf, topo, tables)
		out = append(out, w)
	}
	return out
}
