package generator

import (
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/queries"
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
