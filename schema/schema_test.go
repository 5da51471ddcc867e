package schema

import (
	"strings"
	"testing"
)

// TestIdentifiersStayShortAndUnique checks the derived names of two
// 40-byte queue names that share a 39-byte prefix, in a 63-byte schema.
func TestIdentifiersStayShortAndUnique(t *testing.T) {
	t.Parallel()
	schema := strings.Repeat("s", 63)
	a := Table{Schema: schema, Name: strings.Repeat("q", 39) + "a", Notify: true, Unique: &Unique{States: []string{"pending"}}, Serial: &Serial{Keys: []string{"k"}}}
	b := Table{Schema: schema, Name: strings.Repeat("q", 39) + "b", Notify: true, Unique: &Unique{States: []string{"pending"}}, Serial: &Serial{Keys: []string{"k"}}}
	da, db := a.data(true), b.data(true)
	pairs := []struct{ what, a, b string }{
		{"claim index", da.ClaimIndex, db.ClaimIndex},
		{"lease index", da.LeaseIndex, db.LeaseIndex},
		{"completed index", da.CompletedIndex, db.CompletedIndex},
		{"failed index", da.FailedIndex, db.FailedIndex},
		{"running check", da.RunningCheck, db.RunningCheck},
		{"unique index", da.UniqueIndex, db.UniqueIndex},
		{"serial index", da.SerialIndex, db.SerialIndex},
		{"serial running index", da.SerialRunningIndex, db.SerialRunningIndex},
		{"notify trigger", da.NotifyTrigger, db.NotifyTrigger},
		{"channel", a.Channel(), b.Channel()},
	}
	for _, p := range pairs {
		for _, id := range []string{p.a, p.b} {
			if n := len(strings.Trim(id, `"`)); n > 63 {
				t.Errorf("%s %s is %d bytes, want at most 63", p.what, id, n)
			}
		}
		if p.a == p.b {
			t.Errorf("%s is %s for both queues, want distinct names", p.what, p.a)
		}
	}
}

func TestIdent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int // length of the result
	}{
		{"short", 5},
		{strings.Repeat("x", 63), 63},
		{strings.Repeat("x", 64), 63},
		{strings.Repeat("x", 200), 63},
	}
	for _, tc := range tests {
		if got := Ident(tc.in); len(got) != tc.want {
			t.Errorf("Ident(%d bytes) = %d bytes, want %d", len(tc.in), len(got), tc.want)
		}
	}
}

func TestAlter(t *testing.T) {
	t.Parallel()
	base := Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Notify: true,
		StorageParams: []Param{{"fillfactor", "90"}, {"autovacuum_vacuum_scale_factor", "0.01"}}}
	tests := []struct {
		name   string
		change func(*Table)
		want   []string // statements the DDL must contain; none means no DDL
	}{
		{"unchanged", func(*Table) {}, nil},
		{"max attempts", func(t *Table) { t.MaxAttempts = 5 }, []string{`ALTER COLUMN "max_attempts" SET DEFAULT 5;`}},
		{"priority on", func(t *Table) { t.Priority = true }, []string{`DROP INDEX CONCURRENTLY IF EXISTS "skipjack"."q_claim_idx";`, `CREATE INDEX CONCURRENTLY IF NOT EXISTS "q_claim_next" ON "skipjack"."q" ("priority", "run_at", "id")`, `ALTER INDEX "skipjack"."q_claim_next" RENAME TO "q_claim_idx";`}},
		{"notify off", func(t *Table) { t.Notify = false }, []string{`DROP TRIGGER IF EXISTS "q_notify"`, `DROP FUNCTION IF EXISTS "skipjack"."q_notify"();`}},
		{"storage", func(t *Table) {
			t.StorageParams = []Param{{"fillfactor", "80"}}
		}, []string{`RESET (autovacuum_vacuum_scale_factor)`, `SET (fillfactor = 80)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			to := base
			to.StorageParams = append([]Param(nil), base.StorageParams...)
			tc.change(&to)
			got, err := Alter(base, to)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("Alter = %q, want no DDL", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Alter DDL lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestAlterPriorityExpanding checks the claim index steps of a priority
// change on a live table: the new index is built beside the old one, which
// stays until the contract step drops it and renames the new one; a
// change back with the contract retires the old index and builds the
// next one in one migration.
func TestAlterPriorityExpanding(t *testing.T) {
	t.Parallel()
	const (
		buildPriority = `CREATE INDEX CONCURRENTLY IF NOT EXISTS "q_claim_next" ON "skipjack"."q" ("priority", "run_at", "id")`
		buildPlain    = `CREATE INDEX CONCURRENTLY IF NOT EXISTS "q_claim_next" ON "skipjack"."q" ("run_at", "id")`
		dropOld       = `DROP INDEX CONCURRENTLY IF EXISTS "skipjack"."q_claim_idx";`
		rename        = `ALTER INDEX "skipjack"."q_claim_next" RENAME TO "q_claim_idx";`
	)
	table := func(priority, expanding bool) Table {
		return Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Priority: priority, PriorityExpanding: expanding}
	}
	tests := []struct {
		name      string
		from, to  Table
		want, not []string
	}{
		{"expand", table(false, false), table(true, true), []string{buildPriority}, []string{dropOld, rename}},
		{"still expanding", table(true, true), table(true, true), nil, []string{buildPriority, dropOld, rename}},
		{"contract", table(true, true), table(true, false), []string{dropOld, rename}, []string{buildPriority, buildPlain}},
		{"contract and change back", table(true, true), table(false, true), []string{dropOld, rename, buildPlain}, []string{buildPriority}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Alter(tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("Alter = %q, want no DDL", got)
			}
			checkDDL(t, got, tc.want, tc.not)
		})
	}
}

func TestAlterLayout(t *testing.T) {
	t.Parallel()
	table := func(layout int) Table {
		return Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Notify: true, Layout: layout}
	}
	const (
		addTrace    = `ALTER TABLE "skipjack"."q" ADD COLUMN IF NOT EXISTS "trace" jsonb;`
		dropTrace   = `ALTER TABLE "skipjack"."q" DROP COLUMN IF EXISTS "trace";`
		addCancel   = `ADD COLUMN IF NOT EXISTS "cancel_requested"`
		dropCancel  = `DROP COLUMN IF EXISTS "cancel_requested"`
		notifyQuiet = `current_setting('skipjack.quiet', true)`
	)
	tests := []struct {
		from, to      int
		want, wantNot []string
	}{
		{2, 3, []string{addTrace}, []string{addCancel, dropTrace, notifyQuiet}},
		{3, 2, []string{dropTrace}, []string{addTrace, dropCancel}},
		{0, 3, []string{addCancel, addTrace, notifyQuiet}, []string{dropTrace}},
		{3, 1, []string{dropTrace, dropCancel}, []string{addTrace}},
		{3, 3, nil, []string{addTrace, dropTrace}},
	}
	for _, tc := range tests {
		got, err := Alter(table(tc.from), table(tc.to))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("Alter(layout %d -> %d) lacks %q:\n%s", tc.from, tc.to, w, got)
			}
		}
		for _, w := range tc.wantNot {
			if strings.Contains(got, w) {
				t.Errorf("Alter(layout %d -> %d) has %q:\n%s", tc.from, tc.to, w, got)
			}
		}
	}
	// Down from 3 drops the trace column before layout 2's own reversal,
	// the mirror of the order in which the upgrade adds them.
	got, _ := Alter(table(3), table(1))
	if strings.Index(got, dropTrace) > strings.Index(got, dropCancel) {
		t.Errorf("Alter(layout 3 -> 1) drops cancel_requested before trace:\n%s", got)
	}
}

// TestAlterStepsAreLive checks every kind of change for what makes it safe
// on a live table: indexes built and dropped CONCURRENTLY in steps of their
// own, the CHECK added NOT VALID and validated in a later transaction, and
// a unique key checked for duplicates before its index is built.
func TestAlterStepsAreLive(t *testing.T) {
	t.Parallel()
	base := Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Notify: true, Layout: 1}
	to := base
	to.Layout, to.Priority = CurrentLayout, true
	to.Unique = &Unique{Keys: []string{"k"}, States: []string{"pending", "running"}}
	to.Serial = &Serial{Keys: []string{"account", "region"}}
	for _, tc := range []struct {
		name     string
		from, to Table
	}{{"up", base, to}, {"down", to, base}} {
		steps, err := AlterSteps(tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		var sawNotValid, sawValidate, sawCheck, sawSerial bool
		for _, s := range steps {
			for _, stmt := range append(append([]string(nil), s.Up...), s.Down...) {
				if strings.Contains(stmt, "INDEX") && !strings.Contains(stmt, "RENAME") && !strings.Contains(stmt, "DO $$") {
					if !strings.Contains(stmt, "CONCURRENTLY") {
						t.Errorf("%s: %q builds or drops an index without CONCURRENTLY", tc.name, stmt)
					}
					if s.Kind != NoTransaction || len(s.Up) != 1 {
						t.Errorf("%s: %q is not a non-transactional step of one statement", tc.name, stmt)
					}
				}
			}
			for _, stmt := range s.Up {
				sawNotValid = sawNotValid || strings.Contains(stmt, "NOT VALID")
				sawCheck = sawCheck || strings.Contains(stmt, "RAISE EXCEPTION")
				sawSerial = sawSerial || strings.Contains(stmt, `"q_serial_running_idx"`)
				if strings.Contains(stmt, "VALIDATE CONSTRAINT") {
					sawValidate = true
					if s.Kind != OwnTransaction {
						t.Errorf("%s: %q shares a transaction", tc.name, stmt)
					}
				}
			}
		}
		if tc.name == "up" && !(sawNotValid && sawValidate && sawCheck) {
			t.Errorf("up: NOT VALID %v, VALIDATE %v, duplicate check %v; want all three", sawNotValid, sawValidate, sawCheck)
		}
		if !sawSerial {
			t.Errorf("%s: no step builds or drops the serial key's unique index of running jobs", tc.name)
		}
	}
}

// TestSerialExpandContract checks the two steps of a serial key added to
// a live table: expanding builds only the index claims look predecessors
// up in (the previous release's claims, which do not know the key, must
// never meet a unique index of running keys); contracting checks the
// running jobs and builds that unique index; and a key removed while still
// expanding drops only what exists.
func TestSerialExpandContract(t *testing.T) {
	t.Parallel()
	plain := Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Layout: CurrentLayout}
	expanding, contracted := plain, plain
	expanding.Serial = &Serial{Keys: []string{"k"}, Expanding: true}
	contracted.Serial = &Serial{Keys: []string{"k"}}
	up := func(from, to Table) string {
		t.Helper()
		steps, err := AlterSteps(from, to)
		if err != nil {
			t.Fatal(err)
		}
		var stmts []string
		for _, s := range steps {
			stmts = append(stmts, s.Up...)
		}
		return strings.Join(stmts, "\n")
	}
	for _, tc := range []struct {
		name     string
		from, to Table
		want     []string // substrings of the up statements
		not      []string
	}{
		{"expand", plain, expanding, []string{`CREATE INDEX CONCURRENTLY IF NOT EXISTS "q_serial_idx"`}, []string{"q_serial_running_idx", "RAISE EXCEPTION"}},
		{"contract", expanding, contracted, []string{"RAISE EXCEPTION", `CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "q_serial_running_idx"`}, []string{`"q_serial_idx"`}},
		{"removed while expanding", expanding, plain, []string{`DROP INDEX CONCURRENTLY IF EXISTS "skipjack"."q_serial_idx"`}, []string{"q_serial_running_idx"}},
		{"removed", contracted, plain, []string{`"q_serial_running_idx"`, `"q_serial_idx"`}, nil},
	} {
		got := up(tc.from, tc.to)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: up statements lack %s:\n%s", tc.name, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: up statements contain %s:\n%s", tc.name, n, got)
			}
		}
	}
	ddl, err := Create(expanding)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ddl, "q_serial_running_idx") || !strings.Contains(ddl, "q_serial_idx") {
		t.Errorf("Create of an expanding serial key: want the lookup index only:\n%s", ddl)
	}
}

// TestBusyTrigger checks when a migration gives a serial queue its busy
// keys trigger, replaces it or drops it: with the serial key (added,
// changed, removed) on a table of layout 6, and with the layout on a
// serial table; never when nothing of either changes.
func TestBusyTrigger(t *testing.T) {
	t.Parallel()
	plain := Table{Schema: "skipjack", Name: "q", MaxAttempts: 25, Layout: CurrentLayout}
	serial, other, expanding, old, oldSerial := plain, plain, plain, plain, plain
	serial.Serial = &Serial{Keys: []string{"k"}}
	other.Serial = &Serial{Keys: []string{"k", "j"}}
	expanding.Serial = &Serial{Keys: []string{"k"}, Expanding: true}
	old.Layout = 5
	oldSerial.Layout, oldSerial.Serial = 5, serial.Serial
	const create, drop = `CREATE TRIGGER "q_busy"`, `DROP FUNCTION IF EXISTS "skipjack"."q_busy"()`
	for _, tc := range []struct {
		name     string
		from, to Table
		want     []string
		not      []string
	}{
		{"key added", plain, serial, []string{create}, []string{drop}},
		{"key changed", serial, other, []string{create, `(NEW."payload" -> 'j'`, `DELETE FROM "skipjack"."_skipjack_busy" WHERE "queue" = 'q'`}, []string{drop}},
		{"key removed", serial, plain, []string{drop, `DELETE FROM "skipjack"."_skipjack_busy"`}, []string{create}},
		{"key contracted", expanding, serial, nil, []string{create, drop}},
		{"unchanged", serial, serial, nil, []string{create, drop}},
		{"layout 6 of a serial table", oldSerial, serial, []string{create}, []string{drop}},
		{"layout 5 of a serial table", serial, oldSerial, []string{drop}, []string{create}},
		{"layout 6 of a plain table", old, plain, nil, []string{create, drop}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Alter(tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			checkDDL(t, got, tc.want, tc.not)
		})
	}
}

// checkDDL fails t unless ddl contains every string of want and none of
// not.
func checkDDL(t *testing.T, ddl string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(ddl, w) {
			t.Errorf("DDL lacks %q:\n%s", w, ddl)
		}
	}
	for _, n := range not {
		if strings.Contains(ddl, n) {
			t.Errorf("DDL has %q:\n%s", n, ddl)
		}
	}
}
