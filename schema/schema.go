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
	Table, ClaimIndex, LeaseIndex, FinishedIndex       string
	NotifyFunc, NotifyTrigger, Channel, ChannelLiteral string
	MaxAttempts                                        int
	Priority, Indexes                                  bool
	StorageParams                                      string
}

func (t Table) data(indexes bool) tableData {
	// Queue names are at most 40 bytes, so name + suffix stays far below
	// 63 bytes and distinct names give distinct identifiers.
	d := tableData{
		Table:         t.QualifiedName(),
		ClaimIndex:    QuoteIdent(t.Name + "_claim_idx"),
		LeaseIndex:    QuoteIdent(t.Name + "_lease_idx"),
		FinishedIndex: QuoteIdent(t.Name + "_finished_idx"),
		MaxAttempts:   t.MaxAttempts,
		Priority:      t.Priority,
		Indexes:       indexes,
	}
	if ch := t.Channel(); ch != "" {
		d.Channel = ch
		d.ChannelLiteral = QuoteLiteral(ch)
		d.NotifyFunc = QuoteIdent(t.Schema) + "." + QuoteIdent(t.Name+"_notify")
		d.NotifyTrigger = QuoteIdent(t.Name + "_notify")
	}
	params := make([]string, len(t.StorageParams))
	for i, p := range t.StorageParams {
		params[i] = p.Name + " = " + p.Value
	}
	d.StorageParams = strings.Join(params, ", ")
	return d
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
	return b.String()
}

func render(name string, data any) (string, error) {
	var b strings.Builder
	if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("render %s: %w", name, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
