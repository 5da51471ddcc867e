package schema

import (
	"fmt"
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
		i := strings.Index(full, "CREATE FUNCTION")
		stmts = append(stmts, strings.TrimSpace(full[i:]))
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
