package schema

import (
	"fmt"
	"slices"
	"strings"
)

// Alter returns the DDL that changes table from into table to (same schema
// and name): the max_attempts default, the claim index when priority
// changes, the notify trigger and the storage parameters. It returns "" when
// nothing changes.
func Alter(from, to Table) (string, error) {
	var stmts []string
	name := to.QualifiedName()
	if from.MaxAttempts != to.MaxAttempts {
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN "max_attempts" SET DEFAULT %d;`, name, to.MaxAttempts))
	}
	if from.Priority != to.Priority {
		d := to.data(true)
		cols := `"run_at", "id"`
		if to.Priority {
			cols = `"priority", ` + cols
		}
		stmts = append(stmts,
			fmt.Sprintf("DROP INDEX %s.%s;", QuoteIdent(to.Schema), d.ClaimIndex),
			fmt.Sprintf(`CREATE INDEX %s ON %s (%s) WHERE "state" = 'pending';`, d.ClaimIndex, name, cols))
	}
	if from.Notify && !to.Notify {
		d := from.data(true)
		stmts = append(stmts,
			fmt.Sprintf("DROP TRIGGER %s ON %s;", d.NotifyTrigger, name),
			fmt.Sprintf("DROP FUNCTION %s();", d.NotifyFunc))
	}
	if !from.Notify && to.Notify {
		full, err := Create(to)
		if err != nil {
			return "", err
		}
		// The notify function and trigger are the tail of the full DDL.
		i := strings.Index(full, "CREATE OR REPLACE FUNCTION")
		stmts = append(stmts, strings.TrimSpace(full[i:]))
	}
	stmts = append(stmts, alterLayout(from, to)...)
	if layoutOf(from) == 1 && layoutOf(to) >= 2 && from.Notify && to.Notify {
		// Layout 2's notify function stays silent for producers that wake
		// workers themselves (skipjack.quiet).
		full, err := Create(to)
		if err != nil {
			return "", err
		}
		fn := full[strings.Index(full, "CREATE OR REPLACE FUNCTION"):]
		stmts = append(stmts, strings.TrimSpace(fn[:strings.Index(fn, "$$;")+len("$$;")]))
	}
	if !sameUnique(from.Unique, to.Unique) {
		if from.Unique != nil {
			stmts = append(stmts, fmt.Sprintf("DROP INDEX %s.%s;", QuoteIdent(to.Schema), QuoteIdent(to.Name+"_unique_idx")))
		}
		if to.Unique != nil {
			// Rows that already share a key make this statement fail; the
			// migration then rolls back and the reference documents the
			// query that finds them.
			d := to.data(true)
			stmts = append(stmts, fmt.Sprintf(`CREATE UNIQUE INDEX %s ON %s (%s) WHERE "state" IN (%s);`, d.UniqueIndex, name, d.UniqueExprs, d.UniqueStates))
		}
	}
	if !from.Scheduled && to.Scheduled {
		full, err := CreateTable(to)
		if err != nil {
			return "", err
		}
		i := strings.Index(full, "CREATE TABLE IF NOT EXISTS")
		stmts = append(stmts, strings.TrimSpace(full[i:]))
	}
	if from.Scheduled && !to.Scheduled {
		stmts = append(stmts, fmt.Sprintf(`DELETE FROM %s.%s WHERE "queue" = %s;`, QuoteIdent(to.Schema), QuoteIdent(SlotsTable), QuoteLiteral(to.Name)))
	}
	var set, reset []string
	old := map[string]string{}
	for _, p := range from.StorageParams {
		old[p.Name] = p.Value
	}
	kept := map[string]bool{}
	for _, p := range to.StorageParams {
		kept[p.Name] = true
		if v, ok := old[p.Name]; !ok || v != p.Value {
			set = append(set, p.Name+" = "+p.Value)
		}
	}
	for _, p := range from.StorageParams {
		if !kept[p.Name] {
			reset = append(reset, p.Name)
		}
	}
	if len(reset) > 0 {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s RESET (%s);", name, strings.Join(reset, ", ")))
	}
	if len(set) > 0 {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s SET (%s);", name, strings.Join(set, ", ")))
	}
	if len(stmts) == 0 {
		return "", nil
	}
	return strings.Join(stmts, "\n\n") + "\n", nil
}

// layoutOf returns t's layout, reading the unversioned 0 as 1.
func layoutOf(t Table) int { return max(t.Layout, 1) }

// alterLayout returns the statements that move a table between layouts 1
// to 3 (in either direction), one layout step at a time.
func alterLayout(from, to Table) []string {
	name := to.QualifiedName()
	var stmts []string
	if layoutOf(from) >= 3 && layoutOf(to) < 3 {
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s DROP COLUMN "trace";`, name))
	}
	stmts = append(stmts, alterLayout2(from, to)...)
	if layoutOf(from) < 3 && layoutOf(to) >= 3 {
		// A nullable column without a default: adding it rewrites nothing.
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s ADD COLUMN "trace" jsonb;`, name))
	}
	// Layout 4's workers table is one per schema: the migration creates or
	// drops it once (generator/migrations.go), not once per queue.
	return stmts
}

// alterLayout2 returns the statements that move a table between layout 1
// and layout 2 or later (in either direction).
func alterLayout2(from, to Table) []string {
	name := to.QualifiedName()
	sch := QuoteIdent(to.Schema)
	switch {
	case layoutOf(from) == 1 && layoutOf(to) >= 2:
		return []string{
			fmt.Sprintf(`ALTER TABLE %s ADD COLUMN "cancel_requested" boolean NOT NULL DEFAULT false;`, name),
			fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s CHECK ("state" <> 'running' OR "lease_expires_at" IS NOT NULL);`, name, QuoteIdent(to.Name+"_running_lease")),
			fmt.Sprintf(`CREATE INDEX %s ON %s ("finished_at") WHERE "state" = 'completed';`, QuoteIdent(to.Name+"_completed_idx"), name),
			fmt.Sprintf(`CREATE INDEX %s ON %s ("finished_at") WHERE "state" = 'failed';`, QuoteIdent(to.Name+"_failed_idx"), name),
			fmt.Sprintf("DROP INDEX %s.%s;", sch, QuoteIdent(to.Name+"_finished_idx")),
		}
	case layoutOf(from) >= 2 && layoutOf(to) == 1:
		return []string{
			fmt.Sprintf(`CREATE INDEX %s ON %s ("finished_at") WHERE "state" IN ('completed', 'failed');`, QuoteIdent(to.Name+"_finished_idx"), name),
			fmt.Sprintf("DROP INDEX %s.%s;", sch, QuoteIdent(to.Name+"_completed_idx")),
			fmt.Sprintf("DROP INDEX %s.%s;", sch, QuoteIdent(to.Name+"_failed_idx")),
			fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s;`, name, QuoteIdent(to.Name+"_running_lease")),
			fmt.Sprintf(`ALTER TABLE %s DROP COLUMN "cancel_requested";`, name),
		}
	}
	return nil
}

// sameUnique reports whether two unique keys are the same.
func sameUnique(a, b *Unique) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Keys, b.Keys) && slices.Equal(a.States, b.States)
}
