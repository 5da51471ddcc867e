// Package queries renders the sqlc query file of a queue: enqueue (single
// and COPY), the SKIP LOCKED batch claim, batched ack, retry/fail/snooze,
// heartbeat, release, rescue, prune and stats.
package queries

import (
	"embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/skipjack-dev/skipjack/schema"
)

//go:embed *.sql.tmpl
var files embed.FS

var tmpl = template.Must(template.New("queries").ParseFS(files, "*.sql.tmpl"))

// Queue is what the queries of one queue depend on.
type Queue struct {
	// Table is the quoted, schema-qualified table name; TableLiteral is
	// that name as a SQL literal (for pg_get_serial_sequence).
	Table        string
	TableLiteral string
	// Priority orders the claim by priority first.
	Priority bool
	// KeepCompleted marks acked jobs completed instead of deleting them.
	KeepCompleted bool
	// Notify adds EnqueueQuiet, the insert whose producer wakes workers
	// itself after it committed.
	Notify bool
	// Unique adds the duplicate-aware enqueue queries; UniqueMatch is the
	// condition that finds the job whose key equals that of the payload
	// parameter.
	Unique      bool
	UniqueMatch string
	// UniqueHeld is the condition that finds, in a subquery over the
	// table, the jobs in a unique state whose key equals that of the row
	// aliased t; UniqueSame says whether the rows aliased o and t share a
	// key. Retry uses them to skip jobs that would be duplicates.
	UniqueHeld string
	UniqueSame string
	// UniqueKeyReturned and UniqueKeyInput are the unique key, as one
	// hashable SQL value, of an inserted row (in RETURNING) and of the
	// payload aliased i in EnqueueAll; UniqueHolder finds, in a subquery
	// over the table, the job in a unique state whose key equals that of
	// i's payload. EnqueueAll maps each duplicate to its holder with them.
	UniqueKeyReturned string
	UniqueKeyInput    string
	UniqueHolder      string
	// Scheduled adds the periodic-job queries; Slots is the quoted,
	// schema-qualified slots table and QueueLiteral the queue's name as a
	// SQL literal.
	Scheduled    bool
	Slots        string
	QueueLiteral string
	// Workers is the quoted, schema-qualified workers table, where every
	// running worker renews the row that proves it alive.
	Workers string
	// Queues is the quoted, schema-qualified queues table, which holds
	// whether a queue is paused and the starts its rate limit counts.
	Queues string
	// Counts is the quoted, schema-qualified counts table, where the
	// acknowledging statements count finished jobs per minute.
	Counts string
	// Channel is the queue's NOTIFY channel as a SQL literal, or "" for a
	// poll-only queue; Resume wakes the workers on it.
	Channel string
	// SerialSame is the condition that the rows aliased o and c have the
	// same serial key, or "" for a queue without one: a claim then skips
	// jobs behind a running or earlier job of their key.
	SerialSame string
	// SerialKeys are the payload keys that make up the serial key.
	SerialKeys []string
	// Busy is the quoted, schema-qualified busy keys table, where the
	// insert trigger of a serial queue records its keys with a deep queue.
	Busy string
	// SerialTurns makes the claims of a queue with a serial key take turns
	// under Admit's lock, which keeps the key exact while the unique index
	// of running keys is not built (schema.Serial.Expanding).
	SerialTurns bool
	// Concurrency caps the queue's claimed jobs across processes (0: no
	// cap); RateCount caps the jobs claimed in any window of the last 105
	// slots of RateSlotMillis milliseconds (0: no cap), at least 104 slots
	// long. Either makes Claim the limited claim, which runs after Admit
	// in one transaction.
	Concurrency    int
	RateCount      int
	RateSlotMillis int64
	// PerKey caps the claimed jobs of each key across processes (0: no
	// cap); PerKeyKeys are the payload keys that make up the key. A cap
	// makes Claim the limited claim too.
	PerKey     int
	PerKeyKeys []string
	// AdmitKey is the transaction-scoped advisory lock that serializes
	// the limited claims of the queue.
	AdmitKey int64
	// Floored renders the claim as ClaimFrom's: one that reads the claim
	// index from a floor per priority on (see Floor).
	Floored bool
}

// Floorable reports whether the queue has ClaimFrom, the claim that reads
// the claim index from a floor on. A queue with a serial key or a per-key
// limit has none: its claims pass over due jobs that wait for their key,
// which a floor raised past them would hide until the next Claim.
func (q Queue) Floorable() bool { return q.SerialSame == "" && q.PerKey == 0 }

// Floor returns q rendering ClaimFrom instead of Claim.
func (q Queue) Floor() Queue {
	q.Floored = true
	return q
}

// Limited reports whether the queue declares a limit, whose claims take
// turns under Admit's lock.
func (q Queue) Limited() bool { return q.Concurrency > 0 || q.RateCount > 0 || q.PerKey > 0 }

// KeyOf returns the SQL expression of the per-key limit's key of the row
// aliased alias.
func (q Queue) KeyOf(alias string) string { return schema.KeyValue(alias, q.PerKeyKeys) }

// SerialKey returns the SQL expression of the serial key of the row
// aliased alias, as the busy keys table records it.
func (q Queue) SerialKey(alias string) string { return schema.KeyValue(alias, q.SerialKeys) }

// SerialMatch returns the SQL condition that the row aliased alias has
// the serial key given as the jsonb expression key (as SerialKey renders
// it), written on the serial index's expressions.
func (q Queue) SerialMatch(alias, key string) string {
	return schema.KeyValueMatch(alias, q.SerialKeys, key)
}

// TakesTurns reports whether the queue's claims take turns under Admit's
// lock: a limited queue's, and a serial queue's while its unique index of
// running keys is not built.
func (q Queue) TakesTurns() bool { return q.Limited() || q.SerialTurns }

// pick is what the pick template renders: a queue and the SQL expression
// of how many jobs its claim may take.
type pick struct {
	Queue
	Limit string
}

// Pick returns the data of the pick template for a claim limited to the
// SQL expression limit.
func (q Queue) Pick(limit string) pick { return pick{q, limit} }

// WaitSum is the SQL array that adds the wait histogram of the row being
// inserted (EXCLUDED) to that of the counts row it conflicts with (k),
// element by element.
func (q Queue) WaitSum() string {
	parts := make([]string, q.WaitBuckets()+1)
	for i := range parts {
		parts[i] = fmt.Sprintf(`k."waits"[%d] + EXCLUDED."waits"[%d]`, i+1, i+1)
	}
	return "ARRAY[" + strings.Join(parts, ", ") + "]"
}

// WaitBuckets is the index of the wait histogram's last bucket (the
// histogram has WaitBuckets+1 buckets: below the first bound, between
// bounds, and from the last bound on).
func (Queue) WaitBuckets() int { return len(schema.WaitBoundsMS) }

// Render returns the sqlc query file of q.
func Render(q Queue) (string, error) {
	var b strings.Builder
	if err := tmpl.ExecuteTemplate(&b, "queries.sql.tmpl", q); err != nil {
		return "", fmt.Errorf("render queries: %w", err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
