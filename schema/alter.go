package schema

import (
	"fmt"
	"slices"
	"strings"
)

// LockTimeout is the lock_timeout that every transactional unit of an
// update migration sets before its first statement. A statement that waits
// for a table lock makes every later statement on the table (an Enqueue, a
// claim) wait behind it, so the wait must stay far below the latency a
// producer tolerates: 100ms. A migration that times out is retried by
// skipjack migrate and can be run again by any other tool.
const LockTimeout = "100ms"

// ValidateLockTimeout is the lock_timeout of an OwnTransaction step
// (VALIDATE CONSTRAINT, the duplicate check). Their locks (SHARE UPDATE
// EXCLUSIVE, ACCESS SHARE) block no read or write, so they may wait
// longer, and must outwait deadlock_timeout (1s by default), after which
// Postgres cancels an autovacuum that is in the way of VALIDATE.
const ValidateLockTimeout = "5s"

// StepKind says how a step may run.
type StepKind int

const (
	// InTransaction steps may share one transaction with the
	// InTransaction steps next to them.
	InTransaction StepKind = iota
	// OwnTransaction steps run in a transaction of their own, after the
	// steps before them committed: the scans (VALIDATE CONSTRAINT, the
	// duplicate check of a new unique key), which must not run while a
	// lock that another statement took is held.
	OwnTransaction
	// NoTransaction steps are one statement each way that Postgres refuses
	// to run inside a transaction (CREATE or DROP INDEX CONCURRENTLY).
	NoTransaction
)

// Step is one change of a queue table together with its exact inverse.
type Step struct {
	// Up makes the change and Down undoes it; Down may be empty when
	// there is nothing to undo (a check, a validation).
	Up, Down []string
	// Kind says whether the step may share a transaction.
	Kind StepKind
}

// invert returns the steps that undo steps: their inverses in reverse
// order.
func invert(steps []Step) []Step {
	out := make([]Step, 0, len(steps))
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if len(s.Down) == 0 {
			continue
		}
		out = append(out, Step{Up: s.Down, Down: s.Up, Kind: s.Kind})
	}
	return out
}

// Alter returns the up statements of AlterSteps joined into one text, or
// "" when nothing changes. It is what a reader sees of a change at a
// glance; migrations are built from the steps.
func Alter(from, to Table) (string, error) {
	steps, err := AlterSteps(from, to)
	if err != nil {
		return "", err
	}
	var stmts []string
	for _, s := range steps {
		stmts = append(stmts, s.Up...)
	}
	if len(stmts) == 0 {
		return "", nil
	}
	return strings.Join(stmts, "\n\n") + "\n", nil
}

// AlterSteps returns the steps that change table from into table to (same
// schema and name) on a live table: the max_attempts default, the claim
// index when priority changes, the notify trigger, the layout of the
// runtime-owned columns, the unique key, the slots of periodic jobs and the
// storage parameters. Indexes are built and dropped CONCURRENTLY, CHECK
// constraints are added NOT VALID and validated by a later step, and every
// step can be run again after it failed part way. It returns no steps when
// nothing changes.
func AlterSteps(from, to Table) ([]Step, error) {
	var steps []Step
	name := to.QualifiedName()
	sch := QuoteIdent(to.Schema)
	if from.MaxAttempts != to.MaxAttempts {
		steps = append(steps, Step{
			Up:   []string{fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN "max_attempts" SET DEFAULT %d;`, name, to.MaxAttempts)},
			Down: []string{fmt.Sprintf(`ALTER TABLE %s ALTER COLUMN "max_attempts" SET DEFAULT %d;`, name, from.MaxAttempts)},
		})
	}
	steps = append(steps, claimIndexSteps(from, to)...)
	if from.Notify != to.Notify {
		on := to
		if from.Notify {
			on = from
		}
		create, err := notifyDDL(on)
		if err != nil {
			return nil, err
		}
		d := on.data(true)
		drop := []string{
			fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s;", d.NotifyTrigger, name),
			fmt.Sprintf("DROP FUNCTION IF EXISTS %s();", d.NotifyFunc),
		}
		if to.Notify {
			steps = append(steps, Step{Up: create, Down: drop})
		} else {
			steps = append(steps, Step{Up: drop, Down: create})
		}
	}
	layout, err := alterLayout(from, to)
	if err != nil {
		return nil, err
	}
	steps = append(steps, layout...)
	if !sameUnique(from.Unique, to.Unique) {
		idx := QuoteIdent(to.Name + "_unique_idx")
		if from.Unique != nil {
			steps = append(steps, Step{Kind: NoTransaction,
				Up:   []string{dropIndex(sch, idx)},
				Down: []string{uniqueIndex(from, true)}})
		}
		if to.Unique != nil {
			// The check scans the table: a transaction of its own, so it
			// holds no lock that another statement of the change took.
			steps = append(steps,
				Step{Kind: OwnTransaction, Up: []string{duplicateCheck(to)}},
				Step{Kind: NoTransaction,
					Up:   []string{uniqueIndex(to, true)},
					Down: []string{dropIndex(sch, idx)}})
		}
	}
	if !sameSerial(from.Serial, to.Serial) {
		steps = append(steps, serialSteps(from, to)...)
	}
	if !sameSerialKeys(from.Serial, to.Serial) || hasBusyTrigger(from) != hasBusyTrigger(to) {
		busy, err := busySteps(from, to)
		if err != nil {
			return nil, err
		}
		steps = append(steps, busy...)
	}
	if from.Scheduled != to.Scheduled {
		full, err := CreateTable(Table{Schema: to.Schema, Name: to.Name, Scheduled: true, MaxAttempts: 1})
		if err != nil {
			return nil, err
		}
		create := strings.TrimSpace(full[strings.Index(full, "CREATE TABLE IF NOT EXISTS"):])
		clear := fmt.Sprintf(`DELETE FROM %s.%s WHERE "queue" = %s;`, sch, QuoteIdent(SlotsTable), QuoteLiteral(to.Name))
		if to.Scheduled {
			steps = append(steps, Step{Up: []string{create}, Down: []string{clear}})
		} else {
			steps = append(steps, Step{Up: []string{clear}, Down: []string{create}})
		}
	}
	if up := storageStmts(from, to); len(up) > 0 {
		steps = append(steps, Step{Up: up, Down: storageStmts(to, from)})
	}
	return steps, nil
}

// storageStmts returns the statements that change the storage parameters
// of from into those of to. Skipjack's parameters (fillfactor and the
// autovacuum ones) take a SHARE UPDATE EXCLUSIVE lock, which does not
// block reads or writes.
func storageStmts(from, to Table) []string {
	name := to.QualifiedName()
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
	var stmts []string
	if len(reset) > 0 {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s RESET (%s);", name, strings.Join(reset, ", ")))
	}
	if len(set) > 0 {
		stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s SET (%s);", name, strings.Join(set, ", ")))
	}
	return stmts
}

// busyDDL returns the statements that give serial queue t the insert
// trigger recording its busy keys, replacing the one of an earlier key,
// and forget the keys recorded under an earlier key.
func busyDDL(t Table) ([]string, error) {
	d := t.data(true)
	s, err := render("busy", d)
	if err != nil {
		return nil, err
	}
	end := strings.Index(s, "$$;") + len("$$;")
	return []string{
		strings.TrimSpace(s[:end]),
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s;", d.BusyTrigger, d.Table),
		strings.TrimSpace(s[end:]),
		fmt.Sprintf(`DELETE FROM %s WHERE "queue" = %s;`, d.BusyTable, d.QueueLiteral),
	}, nil
}

// busyDrop returns the statements that remove serial queue t's busy keys
// trigger and the keys it recorded.
func busyDrop(t Table) []string {
	d := t.data(true)
	return []string{
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s;", d.BusyTrigger, d.Table),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s();", d.BusyFunc),
		fmt.Sprintf(`DELETE FROM %s WHERE "queue" = %s;`, d.BusyTable, d.QueueLiteral),
	}
}

// busySteps returns the step that moves the busy keys trigger of from
// (see hasBusyTrigger) to that of to.
func busySteps(from, to Table) ([]Step, error) {
	var up, down []string
	var err error
	switch {
	case hasBusyTrigger(to):
		if up, err = busyDDL(to); err != nil {
			return nil, err
		}
	case hasBusyTrigger(from):
		up = busyDrop(from)
	}
	switch {
	case hasBusyTrigger(from):
		if down, err = busyDDL(from); err != nil {
			return nil, err
		}
	case hasBusyTrigger(to):
		down = busyDrop(to)
	}
	if len(up) == 0 {
		return nil, nil
	}
	return []Step{{Up: up, Down: down}}, nil
}

// notifyDDL returns the notify function and trigger of t.
func notifyDDL(t Table) ([]string, error) {
	full, err := Create(t)
	if err != nil {
		return nil, err
	}
	// The notify function and trigger are the tail of the full DDL.
	tail := full[strings.Index(full, "CREATE OR REPLACE FUNCTION"):]
	end := strings.Index(tail, "$$;") + len("$$;")
	return []string{strings.TrimSpace(tail[:end]), strings.TrimSpace(tail[end:])}, nil
}

// claimIndexSteps returns the steps that change the claim index of from
// into that of to when Priority changes (and when its expansion ends). The
// index of the new setting is built beside the old one as
// <name>_claim_next. On a table live code claims from (to.PriorityExpanding)
// the old one stays for that code's claims until a contract migration;
// otherwise, or at the contract, the old one is dropped and the new one
// takes its name. Claims never lose their index.
func claimIndexSteps(from, to Table) []Step {
	sch := QuoteIdent(to.Schema)
	claim, next := QuoteIdent(to.Name+"_claim_idx"), QuoteIdent(to.Name+"_claim_next")
	var steps []Step
	// retire drops the index of old's other setting, under claim, and
	// renames next (old's setting) to claim.
	retire := func(old Table) {
		prev := old
		prev.Priority = !old.Priority
		steps = append(steps,
			Step{Kind: NoTransaction,
				Up:   []string{dropIndex(sch, claim)},
				Down: []string{claimIndex(prev, claim, true)}},
			Step{
				Up:   []string{fmt.Sprintf("ALTER INDEX %s.%s RENAME TO %s;", sch, next, claim)},
				Down: []string{fmt.Sprintf("ALTER INDEX %s.%s RENAME TO %s;", sch, claim, next)}})
	}
	if from.PriorityExpanding && (!to.PriorityExpanding || from.Priority != to.Priority) {
		// The contract step of from's expansion: from's setting alone.
		retire(from)
	}
	if from.Priority == to.Priority {
		return steps
	}
	steps = append(steps, Step{Kind: NoTransaction,
		Up:   []string{claimIndex(to, next, true)},
		Down: []string{dropIndex(sch, next)}})
	if !to.PriorityExpanding {
		retire(to)
	}
	return steps
}

// dropIndex returns the statement that drops index (quoted) of schema sch
// without blocking writes, and does nothing when it is already gone.
func dropIndex(sch, index string) string {
	return fmt.Sprintf("DROP INDEX CONCURRENTLY IF EXISTS %s.%s;", sch, index)
}

// claimIndex returns the statement that builds t's claim index under the
// quoted name index, concurrently or not.
func claimIndex(t Table, index string, concurrently bool) string {
	cols := `"run_at", "id"`
	if t.Priority {
		cols = `"priority", ` + cols
	}
	return fmt.Sprintf(`CREATE INDEX %s%s ON %s (%s) WHERE "state" = 'pending';`, concurrentlyIfNotExists(concurrently), index, t.QualifiedName(), cols)
}

// uniqueIndex returns the statement that builds t's unique index.
func uniqueIndex(t Table, concurrently bool) string {
	d := t.data(true)
	return fmt.Sprintf(`CREATE UNIQUE INDEX %s%s ON %s (%s) WHERE "state" IN (%s);`, concurrentlyIfNotExists(concurrently), d.UniqueIndex, t.QualifiedName(), d.UniqueExprs, d.UniqueStates)
}

// serialIndexes returns the statements that build t's serial indexes: the
// one a claim looks up a job's predecessors in, and the unique one that
// refuses a second running job of a key.
func serialIndexes(t Table, concurrently bool) [2]string {
	d := t.data(true)
	c := concurrentlyIfNotExists(concurrently)
	return [2]string{
		fmt.Sprintf(`CREATE INDEX %s%s ON %s (%s, "id") WHERE "state" IN ('pending', 'running');`, c, d.SerialIndex, t.QualifiedName(), d.SerialExprs),
		fmt.Sprintf(`CREATE UNIQUE INDEX %s%s ON %s (%s) WHERE "state" = 'running';`, c, d.SerialRunningIndex, t.QualifiedName(), d.SerialExprs),
	}
}

// serialRunningCheck returns the statement that fails, saying what to do,
// when running jobs already share t's new serial key: the unique index of
// running keys built over them would fail only after scanning the table.
func serialRunningCheck(t Table) string {
	d := t.data(true)
	msg := fmt.Sprintf("queue %s has running jobs that share the serial key: workers that do not know the key still claim the queue; "+
		"stop them (or pause the queue: skipjack queues pause %s), wait until the running jobs finish, migrate again (and resume)",
		t.Name, t.Name)
	return fmt.Sprintf(`DO $$
BEGIN
    IF EXISTS (SELECT FROM %s WHERE "state" = 'running' GROUP BY %s HAVING count(*) > 1) THEN
        RAISE EXCEPTION %s USING ERRCODE = 'unique_violation';
    END IF;
END
$$;`, t.QualifiedName(), d.SerialExprs, QuoteLiteral(msg))
}

// finishedIndex returns the statement that builds the partial index of
// finished_at of the jobs in the given states.
func finishedIndex(t Table, index, states string, concurrently bool) string {
	return fmt.Sprintf(`CREATE INDEX %s%s ON %s ("finished_at") WHERE "state" %s;`, concurrentlyIfNotExists(concurrently), index, t.QualifiedName(), states)
}

func concurrentlyIfNotExists(concurrently bool) string {
	if concurrently {
		return "CONCURRENTLY IF NOT EXISTS "
	}
	return ""
}

// duplicateCheck returns the statement that fails, naming the queue and
// the way to find them, when jobs already share t's unique key: a unique
// index built concurrently over them would fail only after scanning the
// whole table, and leave an invalid index behind.
func duplicateCheck(t Table) string {
	d := t.data(true)
	msg := fmt.Sprintf("queue %s has jobs in states %s that share the new unique key; "+
		"find them with the query under \"Unique jobs\" in skipjack's docs/reference.md, resolve them, then migrate again",
		t.Name, strings.Join(t.Unique.States, ", "))
	return fmt.Sprintf(`DO $$
BEGIN
    IF EXISTS (SELECT FROM %s WHERE "state" IN (%s) GROUP BY %s HAVING count(*) > 1) THEN
        RAISE EXCEPTION %s USING ERRCODE = 'unique_violation';
    END IF;
END
$$;`, t.QualifiedName(), d.UniqueStates, d.UniqueExprs, QuoteLiteral(msg))
}

// layoutOf returns t's layout, reading the unversioned 0 as 1.
func layoutOf(t Table) int { return max(t.Layout, 1) }

// alterLayout returns the steps that move a table between layouts 1, 2 and
// 3, in either direction: a downgrade is the inverse of the upgrade. Layout
// 4's workers table, layout 5's queues and counts tables and layout 6's busy
// keys table are one per schema, not per table: the migration creates or
// drops them once (generator/migrations.go); layout 6's trigger of a serial
// queue comes with the serial key's steps (busySteps).
func alterLayout(from, to Table) ([]Step, error) {
	if layoutOf(from) > layoutOf(to) {
		up, err := upgradeLayout(to, from)
		return invert(up), err
	}
	return upgradeLayout(from, to)
}

// upgradeLayout returns the steps that move a table from layout
// layoutOf(from) up to layoutOf(to), one layout at a time.
func upgradeLayout(from, to Table) ([]Step, error) {
	name := to.QualifiedName()
	sch := QuoteIdent(to.Schema)
	var steps []Step
	if layoutOf(from) == 1 && layoutOf(to) >= 2 {
		check := QuoteIdent(to.Name + "_running_lease")
		completed, failed := QuoteIdent(to.Name+"_completed_idx"), QuoteIdent(to.Name+"_failed_idx")
		finished := QuoteIdent(to.Name + "_finished_idx")
		steps = append(steps,
			// A constant default: Postgres 11 and later add the column
			// without rewriting the table.
			Step{
				Up:   []string{fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS "cancel_requested" boolean NOT NULL DEFAULT false;`, name)},
				Down: []string{fmt.Sprintf(`ALTER TABLE %s DROP COLUMN IF EXISTS "cancel_requested";`, name)}},
			// NOT VALID: new rows are checked at once, the existing ones by
			// the next step, which scans them without blocking writes.
			Step{
				Up:   []string{fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s CHECK ("state" <> 'running' OR "lease_expires_at" IS NOT NULL) NOT VALID;`, name, check)},
				Down: []string{fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT IF EXISTS %s;`, name, check)}},
			Step{Kind: OwnTransaction,
				Up: []string{fmt.Sprintf(`ALTER TABLE %s VALIDATE CONSTRAINT %s;`, name, check)}},
			Step{Kind: NoTransaction,
				Up:   []string{finishedIndex(to, completed, "= 'completed'", true)},
				Down: []string{dropIndex(sch, completed)}},
			Step{Kind: NoTransaction,
				Up:   []string{finishedIndex(to, failed, "= 'failed'", true)},
				Down: []string{dropIndex(sch, failed)}},
			Step{Kind: NoTransaction,
				Up:   []string{dropIndex(sch, finished)},
				Down: []string{finishedIndex(to, finished, "IN ('completed', 'failed')", true)}})
		if from.Notify && to.Notify {
			// Layout 2's notify function stays silent for producers that
			// wake workers themselves (skipjack.quiet).
			fn, err := notifyDDL(to)
			if err != nil {
				return nil, err
			}
			steps = append(steps, Step{Up: fn[:1]})
		}
	}
	if layoutOf(from) < 3 && layoutOf(to) >= 3 {
		// A nullable column without a default: adding it rewrites nothing.
		steps = append(steps, Step{
			Up:   []string{fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS "trace" jsonb;`, name)},
			Down: []string{fmt.Sprintf(`ALTER TABLE %s DROP COLUMN IF EXISTS "trace";`, name)}})
	}
	return steps, nil
}

// sameSerial reports whether two serial keys are the same, with the same
// indexes.
func sameSerial(a, b *Serial) bool {
	return sameSerialKeys(a, b) && (a == nil || a.Expanding == b.Expanding)
}

// serialSteps returns the steps that change the serial indexes of from
// into those of to. A key added to a live table is expanding
// (Serial.Expanding): only the index a claim looks predecessors up in is
// built, since the claims of code that does not know the key would trip
// over a unique index of running keys. Contracting builds that index
// once such code is gone, after checking that no two running jobs share a
// key.
func serialSteps(from, to Table) []Step {
	sch := QuoteIdent(to.Schema)
	idx, running := QuoteIdent(to.Name+"_serial_idx"), QuoteIdent(to.Name+"_serial_running_idx")
	keysChanged := from.Serial == nil || to.Serial == nil || !slices.Equal(from.Serial.Keys, to.Serial.Keys)
	var steps []Step
	if from.Serial != nil {
		ddl := serialIndexes(from, true)
		if !from.Serial.Expanding && (keysChanged || to.Serial.Expanding) {
			steps = append(steps, Step{Kind: NoTransaction,
				Up:   []string{dropIndex(sch, running)},
				Down: []string{ddl[1]}})
		}
		if keysChanged {
			steps = append(steps, Step{Kind: NoTransaction,
				Up:   []string{dropIndex(sch, idx)},
				Down: []string{ddl[0]}})
		}
	}
	if to.Serial != nil {
		ddl := serialIndexes(to, true)
		if keysChanged {
			steps = append(steps, Step{Kind: NoTransaction,
				Up:   []string{ddl[0]},
				Down: []string{dropIndex(sch, idx)}})
		}
		if !to.Serial.Expanding && (keysChanged || from.Serial.Expanding) {
			steps = append(steps,
				Step{Kind: OwnTransaction, Up: []string{serialRunningCheck(to)}},
				Step{Kind: NoTransaction,
					Up:   []string{ddl[1]},
					Down: []string{dropIndex(sch, running)}})
		}
	}
	return steps
}

// sameSerialKeys reports whether two serial keys are made of the same
// payload keys (either expanding or not).
func sameSerialKeys(a, b *Serial) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Keys, b.Keys)
}

// sameUnique reports whether two unique keys are the same.
func sameUnique(a, b *Unique) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Keys, b.Keys) && slices.Equal(a.States, b.States)
}
