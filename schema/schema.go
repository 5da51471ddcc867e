// Package schema renders the DDL of queue tables: the table every queue
// gets, with the partial indexes its claim and rescue queries need and the
// trigger that notifies workers, and the statements that drop it again.
package schema

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"
)

//go:embed *.sql.tmpl
var files embed.FS

var tmpl = template.Must(template.New("schema").ParseFS(files, "*.sql.tmpl"))

// Table describes one queue table.
type Table struct {
	// Schema is the Postgres schema (unquoted).
	Schema string
	// Name is the queue's name, which is also the table's name.
	Name string
	// MaxAttempts is the column default of max_attempts.
	MaxAttempts int
	// Priority orders the claim index by priority first.
	Priority bool
	// Notify adds the statement-level trigger that NOTIFYs Channel.
	Notify bool
	// StorageParams are the table's storage parameters, in order.
	StorageParams []Param
	// Layout is the version of the runtime-owned columns, constraints and
	// indexes. States recorded before layouts were versioned read as 0,
	// which means layout 1.
	Layout int `json:",omitempty"`
	// Unique, when set, adds the unique index that makes duplicate jobs
	// impossible.
	Unique *Unique `json:",omitempty"`
	// Scheduled says the queue has periodic jobs, whose last inserted slot
	// per schedule is kept in the schema's slots table.
	Scheduled bool `json:",omitempty"`
	// Serial, when set, adds the indexes with which a claim finds the
	// first job of each key and the database refuses two running jobs of
	// one key.
	Serial *Serial `json:",omitempty"`
	// PriorityExpanding says Priority was changed on a table that live
	// code already claimed from, and the claim index of the previous
	// setting is kept (as <name>_claim_idx) beside the one of the new
	// setting (<name>_claim_next): the previous release's claims, which
	// order by the other columns, would otherwise read every pending job
	// and sort them to take a few, and lose every race to the new code's.
	// A contract migration (skipjack generate --contract, once no worker
	// of the previous release runs) drops the old index and gives the new
	// one its name.
	PriorityExpanding bool `json:",omitempty"`
}

// Serial is the serial key of a queue's jobs: jobs with equal keys run one
// at a time, in id order.
type Serial struct {
	// Keys are the payload keys that make up the key.
	Keys []string
	// Expanding says the key was added to (or changed on) a table that
	// live code already claimed from, and the unique index of running keys
	// is not built yet: the previous release's claims, which do not know
	// the key, would trip over it and fail. Until a contract migration
	// builds it (skipjack generate --contract, once no worker of the
	// previous release runs), the claims of the new code take turns under
	// the queue's advisory lock, which keeps the key exact among them.
	Expanding bool `json:",omitempty"`
}

// CurrentLayout is the layout Create renders. Layout 2 added a
// cancel_requested column, a CHECK that a running job has a lease, and
// separate partial indexes of completed and failed jobs (layout 1 had one
// index of both); layout 3 added the nullable trace column, the trace
// context of the Enqueue call (NULL when nothing injected one).
//
// Layout 4 added the schema's workers table, where every running worker
// proves that it is alive (see WorkersTable); layout 5 added the schema's
// queues table, which holds what workers of every process agree on about a
// queue: whether it is paused and the recent starts its rate limit counts
// (see QueuesTable), and the schema's counts table, where the statements
// that acknowledge and resolve jobs record per-minute activity (see
// CountsTable).
//
// Layout 6 added the schema's busy keys table, where the insert trigger of
// a serial queue records the keys with a deep queue of waiting jobs, so
// that a claim looks up those keys' first jobs instead of reading past
// every job queued behind them (see BusyTable).
const CurrentLayout = 6

// BusyDepth is how many earlier jobs of its serial key must be pending or
// running when a job is inserted (and checks, see BusyCheckEvery) for its
// key to be recorded as busy. Below it, a claim reads past the key's
// waiting jobs, a probe each (cheaper than looking the key's first job up
// at every claim); above it, a claim looks the key's first job up and
// never reads the rest.
const BusyDepth = 16

// BusyCheckEvery is how many inserts of a serial queue there are for one
// that checks, at random, whether its key got busy (see BusyDepth): the
// check is a trigger function call, which would cost a producer of keys
// that never get busy a third of a single-row insert if every insert made
// it, and one in 8 still a fifth of a bulk enqueue's rate.
const BusyCheckEvery = 32

// busyLayout is the layout that added the busy keys table and the insert
// trigger of serial queues.
const busyLayout = 6

// hasBusyTrigger reports whether t has the insert trigger that records its
// busy keys: a serial queue of busyLayout or later.
func hasBusyTrigger(t Table) bool { return t.Serial != nil && layoutOf(t) >= busyLayout }

// BusyTable is the unquoted name of the table, one per schema, that holds
// the busy keys of serial queues: keys with at least BusyDepth jobs queued
// when a job of theirs was inserted (and checked). A claim of a
// serial queue looks up the first job of each of its busy keys and skips
// every other job of those keys, so a key with thousands of queued jobs
// costs each claim one lookup instead of a probe per job. The table is a
// hint, right in both directions: a key missing from it is read past as
// before, and a key listed without waiting jobs costs one lookup until a
// claim finds it empty and removes it.
const BusyTable = "_skipjack_busy"

// Busy is the quoted, schema-qualified name of the busy keys table of
// schema.
func Busy(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(BusyTable) }

// CreateBusy returns the DDL of the busy keys table of schema. Migrations
// hold it once (not once per queue); CreateTable adds it to each queue's
// table, since sqlc needs it to check the queries that use it.
func CreateBusy(schema string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n    \"queue\" text NOT NULL,\n    \"key\" jsonb NOT NULL,\n    PRIMARY KEY (\"queue\", \"key\")\n);\n", Busy(schema))
}

// DropBusy returns the DDL that drops the busy keys table of schema.
func DropBusy(schema string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s;\n", Busy(schema))
}

// Unique is the unique key of a queue's jobs.
type Unique struct {
	// Keys are the payload keys that make a job a duplicate; empty means
	// the whole payload.
	Keys []string `json:",omitempty"`
	// States are the job states in which the key must be unique.
	States []string
}

// SlotsTable is the unquoted name of the table, one per schema, that holds
// the last slot inserted for each schedule of each queue. Queue names start
// with a letter, so it can never be a queue's table.
const SlotsTable = "_skipjack_slots"

// WorkersTable is the unquoted name of the table, one per schema, in which
// every running worker renews a row of its own: the proof that it is alive,
// which rescue consults before it takes a job from the worker whose lease
// on it lapsed. Keeping it off the job rows means that locks on those rows
// or on a queue table (a handler's open CompleteTx transaction, an
// operator, a migration) cannot make a live worker look dead.
const WorkersTable = "_skipjack_workers"

// Workers is the quoted, schema-qualified name of the workers table of
// schema.
func Workers(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(WorkersTable) }

// CreateWorkers returns the DDL of the workers table of schema. Migrations
// hold it once (not once per queue); CreateTable adds it to each queue's
// table, since sqlc needs it to check the queries that use it.
func CreateWorkers(schema string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n    \"id\" text PRIMARY KEY,\n    \"expires_at\" timestamptz NOT NULL,\n    \"started_at\" timestamptz NOT NULL DEFAULT now(),\n    \"stopped_at\" timestamptz\n);\n", Workers(schema))
}

// DropWorkers returns the DDL that drops the workers table of schema.
func DropWorkers(schema string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s;\n", Workers(schema))
}

// CountsTable is the unquoted name of the table, one per schema, in which
// the statements that acknowledge and resolve jobs count what finished, per
// queue, minute and worker, with a histogram of how long the completed jobs
// waited before they started. Rows are keyed by worker (a flush loop writes
// one statement at a time) or, for CompleteTx, by the database session, so
// no two concurrent statements ever write one row. It is what a dashboard
// charts, and it works for queues that delete jobs at ack.
const CountsTable = "_skipjack_counts"

// WaitBoundsMS are the upper bounds, in milliseconds, of the buckets of a
// counts row's wait histogram; a last bucket holds the longer waits. Steps
// of 1-2-5 keep a quantile read from it within a factor of 2.5 and make
// its bounds round numbers an operator reads at a glance.
var WaitBoundsMS = []int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000, 120000, 300000, 600000, 1800000, 3600000}

// Counts is the quoted, schema-qualified name of the counts table of
// schema.
func Counts(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(CountsTable) }

// CreateCounts returns the DDL of the counts table of schema. Migrations
// hold it once (not once per queue); CreateTable adds it to each queue's
// table, since sqlc needs it to check the queries that use it.
func CreateCounts(schema string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n"+
		"    \"queue\" text NOT NULL,\n"+
		"    \"minute\" timestamptz NOT NULL,\n"+
		"    \"worker\" text NOT NULL,\n"+
		"    \"completed\" bigint NOT NULL DEFAULT 0,\n"+
		"    \"failed\" bigint NOT NULL DEFAULT 0,\n"+
		"    \"retried\" bigint NOT NULL DEFAULT 0,\n"+
		"    \"waits\" bigint[] NOT NULL DEFAULT array_fill(0::bigint, ARRAY[%d]),\n"+
		"    PRIMARY KEY (\"queue\", \"minute\", \"worker\")\n"+
		");\n", Counts(schema), len(WaitBoundsMS)+1)
}

// DropCounts returns the DDL that drops the counts table of schema.
func DropCounts(schema string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s;\n", Counts(schema))
}

// QueuesTable is the unquoted name of the table, one per schema, that holds
// one row per queue that was ever paused or rate limited: paused_at is set
// while the queue is paused, and rate_slots/rate_counts log how many jobs
// its claims started in each hundredth of its rate window. A queue without
// a row is running and unlimited.
const QueuesTable = "_skipjack_queues"

// Queues is the quoted, schema-qualified name of the queues table of
// schema.
func Queues(schema string) string { return QuoteIdent(schema) + "." + QuoteIdent(QueuesTable) }

// CreateQueues returns the DDL of the queues table of schema. Migrations
// hold it once (not once per queue); CreateTable adds it to each queue's
// table, since sqlc needs it to check the queries that use it.
func CreateQueues(schema string) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n    \"name\" text PRIMARY KEY,\n    \"paused_at\" timestamptz,\n    \"rate_slots\" bigint[] NOT NULL DEFAULT '{}',\n    \"rate_counts\" integer[] NOT NULL DEFAULT '{}'\n);\n", Queues(schema))
}

// DropQueues returns the DDL that drops the queues table of schema.
func DropQueues(schema string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s;\n", Queues(schema))
}

// Param is one storage parameter; Value is SQL text.
type Param struct {
	Name, Value string
}

// QuoteIdent quotes a Postgres identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// QuoteLiteral quotes a Postgres string literal.
func QuoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}

// QualifiedName is the quoted schema-qualified table name.
func (t Table) QualifiedName() string { return QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name) }

// Channel is the NOTIFY channel of the table, or "" when notify is off. It is
// "<schema>.<name>" when that fits in Postgres's 63-byte identifier limit and
// a shortened form with a hash of the full name otherwise, so it stays unique.
func (t Table) Channel() string {
	if !t.Notify {
		return ""
	}
	return Ident(t.Schema + "." + t.Name)
}

// Ident returns s if it fits in 63 bytes, else a prefix of s joined to a
// hash of all of s, 63 bytes long, so distinct inputs stay distinct.
func Ident(s string) string {
	const max = 63
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:12]
	return s[:max-len(h)-1] + "_" + h
}

// tableData is what table.sql.tmpl renders.
type tableData struct {
	Table, ClaimIndex, LeaseIndex                      string
	CompletedIndex, FailedIndex, RunningCheck          string
	UniqueIndex, UniqueExprs, UniqueStates, Slots      string
	SerialIndex, SerialRunningIndex, SerialExprs       string
	WorkersDDL, QueuesDDL, CountsDDL, BusyDDL          string
	BusyFunc, BusyTrigger, BusyTable, QueueLiteral     string
	BusyDepth, BusyCheckEvery                          int
	BusyKey, BusySame                                  string
	NotifyFunc, NotifyTrigger, Channel, ChannelLiteral string
	MaxAttempts                                        int
	Priority, Indexes                                  bool
	StorageParams                                      string
}

func (t Table) data(indexes bool) tableData {
	// Queue names are at most 40 bytes, so name + suffix stays far below
	// 63 bytes and distinct names give distinct identifiers.
	d := tableData{
		Table:          t.QualifiedName(),
		ClaimIndex:     QuoteIdent(t.Name + "_claim_idx"),
		LeaseIndex:     QuoteIdent(t.Name + "_lease_idx"),
		CompletedIndex: QuoteIdent(t.Name + "_completed_idx"),
		FailedIndex:    QuoteIdent(t.Name + "_failed_idx"),
		RunningCheck:   QuoteIdent(t.Name + "_running_lease"),
		WorkersDDL:     CreateWorkers(t.Schema),
		QueuesDDL:      CreateQueues(t.Schema),
		CountsDDL:      CreateCounts(t.Schema),
		BusyDDL:        CreateBusy(t.Schema),
		MaxAttempts:    t.MaxAttempts,
		Priority:       t.Priority,
		Indexes:        indexes,
	}
	if ch := t.Channel(); ch != "" {
		d.Channel = ch
		d.ChannelLiteral = QuoteLiteral(ch)
		d.NotifyFunc = QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name+"_notify")
		d.NotifyTrigger = QuoteIdent(t.Name + "_notify")
	}
	if t.Unique != nil {
		d.UniqueIndex = QuoteIdent(t.Name + "_unique_idx")
		d.UniqueExprs = t.Unique.exprs()
		d.UniqueStates = t.Unique.statesSQL()
	}
	if t.Serial != nil {
		d.SerialIndex = QuoteIdent(t.Name + "_serial_idx")
		if !t.Serial.Expanding {
			d.SerialRunningIndex = QuoteIdent(t.Name + "_serial_running_idx")
		}
		d.SerialExprs = keyExprs(t.Serial.Keys)
		d.BusyFunc = QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name+"_busy")
		d.BusyTrigger = QuoteIdent(t.Name + "_busy")
		d.BusyTable = Busy(t.Schema)
		d.QueueLiteral = QuoteLiteral(t.Name)
		d.BusyDepth, d.BusyCheckEvery = BusyDepth, BusyCheckEvery
		d.BusyKey = KeyValue("NEW", t.Serial.Keys)
		d.BusySame = t.Serial.SameKey("o", "NEW")
	}
	if t.Scheduled {
		d.Slots = QuoteIdent(t.Schema) + "." + QuoteIdent(SlotsTable)
	}
	params := make([]string, len(t.StorageParams))
	for i, p := range t.StorageParams {
		params[i] = p.Name + " = " + p.Value
	}
	d.StorageParams = strings.Join(params, ", ")
	return d
}

// exprs returns the index expressions of the unique key: one per payload
// key (a missing key counts as JSON null, so it still collides), or the
// whole payload.
func (u *Unique) exprs() string {
	if len(u.Keys) == 0 {
		return `"payload"`
	}
	return keyExprs(u.Keys)
}

// keyExprs returns the index expressions of a key made of payload keys:
// one per key, a missing key counting as JSON null.
func keyExprs(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(`(coalesce("payload" -> %s, 'null'::jsonb))`, QuoteLiteral(k))
	}
	return strings.Join(parts, ", ")
}

// SameKey returns the SQL condition that the rows aliased a and b have the
// same serial key.
func (s *Serial) SameKey(a, b string) string {
	parts := make([]string, len(s.Keys))
	for i, k := range s.Keys {
		parts[i] = fmt.Sprintf(`coalesce(%s."payload" -> %s, 'null'::jsonb) = coalesce(%s."payload" -> %s, 'null'::jsonb)`, a, QuoteLiteral(k), b, QuoteLiteral(k))
	}
	return strings.Join(parts, " AND ")
}

// KeyValue returns the SQL expression of one key made of payload keys,
// read from the row aliased alias: the key's one value (a missing key
// counting as JSON null), or a JSON array of its values when it has more
// than one, so that equal keys compare, group and hash as one jsonb value.
func KeyValue(alias string, keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(`coalesce(%s."payload" -> %s, 'null'::jsonb)`, alias, QuoteLiteral(k))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "jsonb_build_array(" + strings.Join(parts, ", ") + ")"
}

// KeyValueMatch returns the SQL condition that the row aliased alias has
// the key made of payload keys that KeyValue renders as the jsonb
// expression value: one comparison per payload key, as an index on the
// key's expressions (keyExprs) reads it.
func KeyValueMatch(alias string, keys []string, value string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := value
		if len(keys) > 1 {
			v = fmt.Sprintf("(%s -> %d)", value, i)
		}
		parts[i] = fmt.Sprintf(`coalesce(%s."payload" -> %s, 'null'::jsonb) = %s`, alias, QuoteLiteral(k), v)
	}
	return strings.Join(parts, " AND ")
}

// statesSQL returns the quoted list of the key's states.
func (u *Unique) statesSQL() string {
	parts := make([]string, len(u.States))
	for i, s := range u.States {
		parts[i] = QuoteLiteral(s)
	}
	return strings.Join(parts, ", ")
}

// KeyMatch returns the SQL condition that finds the rows whose unique key
// equals that of the payload given as the jsonb expression payload.
func (u *Unique) KeyMatch(payload string) string {
	if len(u.Keys) == 0 {
		return fmt.Sprintf(`"payload" = %s AND "state" IN (%s)`, payload, u.statesSQL())
	}
	parts := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		parts[i] = fmt.Sprintf(`coalesce("payload" -> %s, 'null'::jsonb) = coalesce(%s -> %s, 'null'::jsonb)`, QuoteLiteral(k), payload, QuoteLiteral(k))
	}
	return strings.Join(parts, " AND ") + fmt.Sprintf(` AND "state" IN (%s)`, u.statesSQL())
}

// KeyOf returns the unique key of the payload given as the jsonb
// expression payload, as one SQL value that equals another payload's
// exactly when the two are duplicates (and that a hash join can match):
// the payload itself, or the array of its key fields, a missing field
// counting as JSON null as in the unique index.
func (u *Unique) KeyOf(payload string) string {
	if len(u.Keys) == 0 {
		return payload
	}
	parts := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		parts[i] = fmt.Sprintf(`coalesce(%s -> %s, 'null'::jsonb)`, payload, QuoteLiteral(k))
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]"
}

// SameKey returns the SQL condition that two payloads, given as jsonb
// expressions a and b, have the same unique key.
func (u *Unique) SameKey(a, b string) string {
	if len(u.Keys) == 0 {
		return a + " = " + b
	}
	parts := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		parts[i] = fmt.Sprintf(`coalesce(%s -> %s, 'null'::jsonb) = coalesce(%s -> %s, 'null'::jsonb)`, a, QuoteLiteral(k), b, QuoteLiteral(k))
	}
	return strings.Join(parts, " AND ")
}

// CreateTable returns the CREATE TABLE statement alone: what sqlc needs to
// know the table's columns.
func CreateTable(t Table) (string, error) {
	return render("table.sql.tmpl", t.data(false))
}

// Create returns the DDL that creates the table with its indexes and, when
// notify is on, its notify function and trigger.
func Create(t Table) (string, error) {
	return render("table.sql.tmpl", t.data(true))
}

// Drop returns the DDL that drops the table and its notify function.
func Drop(t Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "DROP TABLE IF EXISTS %s;\n", t.QualifiedName())
	if t.Notify {
		fmt.Fprintf(&b, "\nDROP FUNCTION IF EXISTS %s.%s();\n", QuoteIdent(t.Schema), QuoteIdent(t.Name+"_notify"))
	}
	if hasBusyTrigger(t) {
		fmt.Fprintf(&b, "\nDROP FUNCTION IF EXISTS %s.%s();\n", QuoteIdent(t.Schema), QuoteIdent(t.Name+"_busy"))
	}
	return b.String()
}

func render(name string, data any) (string, error) {
	var b strings.Builder
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
