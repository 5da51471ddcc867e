package generator

import (
	"hash/fnv"
	"time"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/queries"
	"github.com/skipjack-dev/skipjack/schema"
)

// model is what every renderer reads, built once from the config by
// buildModel: one queueModel per live queue, in file order, and the state
// the migrations must bring the database to.
type model struct {
	queues []queueModel
	state  state
}

// state is the database a config describes: its schema and its queue
// tables. Each generated migration records the state after it.
type state struct {
	Schema string         `json:"schema"`
	Tables []schema.Table `json:"tables"`
	// WorkflowQueues are the queues that workflows use, sorted: their
	// tables carry the workflow triggers (see package schema).
	WorkflowQueues []string `json:"workflow_queues,omitempty"`
}

// queueModel is one live queue: its config, its table and what its sqlc
// queries depend on.
type queueModel struct {
	cfg     *config.Queue
	table   schema.Table
	queries queries.Queue
}

// buildModel builds the model of cfg.
func buildModel(cfg *config.Config) *model {
	m := &model{state: state{Schema: cfg.Schema, Tables: []schema.Table{}}}
	for _, q := range cfg.LiveQueues() {
		t := tableOf(cfg, &q)
		m.queues = append(m.queues, queueModel{cfg: &q, table: t, queries: queriesOf(t, &q)})
		m.state.Tables = append(m.state.Tables, t)
	}
	m.state.WorkflowQueues = workflowQueues(cfg)
	return m
}

// settle makes st, the state the planned migrations bring the database
// to, the model's: a queue's table may differ from the YAML's in what waits
// for a contract step (see settleSerial), and its claim with it.
func (m *model) settle(st state) {
	m.state = st
	for i := range m.queues {
		q := &m.queues[i]
		for _, t := range st.Tables {
			if t.Name == q.table.Name {
				q.table, q.queries = t, queriesOf(t, q.cfg)
			}
		}
	}
}

// tableOf returns the schema description of q's table.
func tableOf(cfg *config.Config, q *config.Queue) schema.Table {
	t := schema.Table{
		Schema:      cfg.Schema,
		Name:        q.Name,
		MaxAttempts: q.MaxAttempts,
		Priority:    q.Priority,
		Notify:      q.Notify,
		Layout:      schema.CurrentLayout,
		Scheduled:   len(q.Schedule) > 0,
	}
	if q.Unique != nil {
		t.Unique = &schema.Unique{Keys: q.Unique.By, States: q.Unique.States}
	}
	if q.Serial != nil {
		t.Serial = &schema.Serial{Keys: q.Serial.By}
	}
	set := map[string]bool{}
	for _, p := range q.Table {
		t.StorageParams = append(t.StorageParams, schema.Param{Name: p.Name, Value: p.Value})
		set[p.Name] = true
	}
	for _, p := range defaultStorageParams {
		if !set[p.Name] {
			t.StorageParams = append(t.StorageParams, p)
		}
	}
	return t
}

// defaultStorageParams are the storage parameters of every queue table
// unless its table: section sets them. A queue table churns: every job is
// inserted, updated at least twice and deleted, so autovacuum must run long
// before Postgres's default of 20% dead rows, or claims slow down scanning
// dead index entries.
var defaultStorageParams = []schema.Param{
	{Name: "fillfactor", Value: "90"},
	{Name: "autovacuum_vacuum_scale_factor", Value: "0.01"},
	{Name: "autovacuum_vacuum_insert_scale_factor", Value: "0.01"},
	{Name: "autovacuum_analyze_scale_factor", Value: "0.02"},
}

// queriesOf returns what the query file of q's table t depends on.
func queriesOf(t schema.Table, q *config.Queue) queries.Queue {
	qq := queries.Queue{
		Table:         t.QualifiedName(),
		TableLiteral:  schema.QuoteLiteral(t.QualifiedName()),
		Priority:      q.Priority,
		KeepCompleted: q.RetainCompleted > 0,
		QueueLiteral:  schema.QuoteLiteral(q.Name),
		Notify:        t.Notify,
		Workers:       schema.Workers(t.Schema),
		Queues:        schema.Queues(t.Schema),
		Counts:        schema.Counts(t.Schema),
		AdmitKey:      admitKey(t.QualifiedName()),
	}
	if ch := t.Channel(); ch != "" {
		qq.Channel = schema.QuoteLiteral(ch)
	}
	if t.Serial != nil {
		qq.SerialSame = t.Serial.SameKey("o", "c")
		qq.SerialKeys = t.Serial.Keys
		qq.Busy = schema.Busy(t.Schema)
		qq.SerialTurns = t.Serial.Expanding
	}
	if l := q.Limits; l != nil {
		qq.Concurrency = l.Concurrency
		if l.Rate != nil {
			qq.RateCount = l.Rate.Count
			qq.RateSlotMillis = rateSlotMillis(l.Rate.Per)
		}
		if l.PerKey != nil {
			qq.PerKey = l.PerKey.Concurrency
			qq.PerKeyKeys = l.PerKey.By
		}
	}
	if t.Unique != nil {
		qq.Unique = true
		qq.UniqueMatch = t.Unique.KeyMatch("sqlc.arg(payload)::text::jsonb")
		qq.UniqueHeld = t.Unique.KeyMatch(`t."payload"`)
		qq.UniqueSame = t.Unique.SameKey(`o."payload"`, `t."payload"`)
		qq.UniqueKeyReturned = t.Unique.KeyOf(`"payload"`)
		qq.UniqueKeyInput = t.Unique.KeyOf(`i."payload"`)
		qq.UniqueHolder = t.Unique.KeyMatch(`i."payload"`)
	}
	if t.Scheduled {
		qq.Scheduled = true
		qq.Slots = schema.QuoteIdent(t.Schema) + "." + schema.QuoteIdent(schema.SlotsTable)
	}
	return qq
}

// rateSlotMillis returns the length, in whole milliseconds, of the slots
// in which the limited claims of a queue with a rate window of per log
// their starts: a hundredth of per, rounded up. A claim counts the starts
// of the current slot and of the 104 before it (the "rateSlots" template of
// package queries), so a start stays counted for more than 104 slots, which
// must not be shorter than per. Rounded down, it was whenever per left a
// remainder under 2.5s: per 1099ms made slots of 10ms, and 40 starts of a
// queue allowed 20 fitted into 1099ms.
func rateSlotMillis(per time.Duration) int64 {
	const hundredth = 100 * time.Millisecond // per/100 in milliseconds is per in units of 100ms
	return int64((per + hundredth - 1) / hundredth)
}

// admitKey returns the advisory lock key under which the limited claims of
// the queue table named table take turns: a 64-bit FNV-1a hash of
// "skipjack:claim:" and the name, the scheme skipjack migrate's locks use.
func admitKey(table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("skipjack:claim:" + table))
	return int64(h.Sum64())
}
