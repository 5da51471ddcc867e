package generator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
)

// stateMarker starts the line of a generated migration that records the
// queue tables as they are after it, so the next run can diff against it.
const stateMarker = "-- skipjack:state "

// Markers of the migration formats that keep up and down in one file.
const (
	gooseUp        = "-- +goose Up"
	gooseDown      = "-- +goose Down"
	gooseBegin     = "-- +goose StatementBegin"
	gooseEnd       = "-- +goose StatementEnd"
	ternSeparator  = "---- create above / drop below ----"
	formatPlain    = "plain"
	formatGoose    = "goose"
	formatMigrate  = "golang-migrate"
	formatTern     = "tern"
	firstMigration = "skipjack_init"
)

// migration is one generated migration.
type migration struct {
	Version int
	Name    string // file name without extension (0001_skipjack_init)
	Up      string // the up SQL
	Down    string // the down SQL, as readMigrations reads it; empty for planned ones
}

// migrationPlan is the existing generated migrations plus the ones the
// YAML needs now, if any.
type migrationPlan struct {
	all      []migration // every generated migration, in version order
	newFiles []File
	// state is the state the migrations bring the database to: the
	// YAML's, with the serial keys that wait for a contract step marked
	// (see settleSerial).
	state state
	// rollout says, per change that is rolled out in steps, what to do in
	// which order.
	rollout []rolloutNote
}

var versionPrefix = regexp.MustCompile(`^(\d+)_`)

// A unit is what one migration file holds: statements that share one
// transaction, or statements that each run on their own outside any
// transaction (CREATE and DROP INDEX CONCURRENTLY, which Postgres refuses
// to run in a transaction, even the implicit one of a multi-statement
// query).
type unit struct {
	noTx     bool
	own      bool // an OwnTransaction step: a scan (VALIDATE CONSTRAINT, a duplicate check)
	up, down []string
}

// NoTransactionMarker starts the body of a generated migration whose
// statements must run outside a transaction; skipjack's applier reads it.
// Each format also carries its own tool's marker.
const NoTransactionMarker = "-- skipjack:no-transaction"

// Lines that the non-transactional units carry for the reader and for
// squawk. A concurrent index build or drop takes a SHARE UPDATE EXCLUSIVE
// lock, which reads and writes never wait for, and then waits for the
// transactions already running: a lock_timeout would fail it whenever a
// worker's transaction is open, so it has none.
const (
	noTxComment  = NoTransactionMarker + " (CONCURRENTLY cannot run inside a transaction)"
	squawkNoLock = "-- No lock_timeout: SHARE UPDATE EXCLUSIVE blocks no read or write, and a lock_timeout would fail the build behind any open transaction.\n" +
		"-- squawk-ignore-file require-lock-timeout"
	nothingToDo = "-- Nothing to undo."
	ternNoTx    = "---- tern: disable-tx ----"
	gooseNoTx   = "-- +goose NO TRANSACTION"
)

// planMigrations reads the migrations folder and plans the migrations that
// bring the database from the last recorded state to the YAML's: one
// migration (one version) per unit.
// With contract, it also plans the contract steps of earlier expansions
// (see settleSerial and settlePriority).
func planMigrations(cfg *config.Config, want state, contract bool) (*migrationPlan, error) {
	dir := filepath.Join(cfg.Dir, filepath.FromSlash(cfg.Migrations.Dir))
	existing, last, maxVersion, err := readMigrations(dir, cfg.Migrations.Format)
	if err != nil {
		return nil, err
	}
	want, notes := settleSerial(cfg, last, want, contract)
	want, priorityNotes, err := settlePriority(cfg, last, want, contract)
	if err != nil {
		return nil, err
	}
	notes = append(notes, priorityNotes...)
	notes = append(notes, dropNotes(cfg, last)...)
	plan := &migrationPlan{all: existing, state: want, rollout: notes}
	units, name, err := diffState(cfg, last, want)
	if err != nil {
		return nil, err
	}
	if len(units) == 0 {
		return plan, nil
	}
	stateJSON, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("encode migration state: %w", err)
	}
	head := SQLHeader + "\n" + stateMarker + string(stateJSON) + "\n\n"
	rel := path.Clean(cfg.Migrations.Dir)
	// The lock_timeout guards live tables; the first migration creates
	// tables nothing uses yet.
	update := last != nil && len(last.Tables) > 0
	for i, u := range units {
		version := maxVersion + 1 + i
		base := fmt.Sprintf("%04d_%s", version, name)
		if i > 0 {
			base += "_" + strconv.Itoa(i+1)
		}
		up, down := u.render(u.up, update, cfg.Migrations.Format), u.render(u.down, update, cfg.Migrations.Format)
		switch cfg.Migrations.Format {
		case formatGoose:
			file := head
			if u.noTx {
				file += gooseNoTx + "\n"
			}
			plan.newFiles = append(plan.newFiles, File{Path: path.Join(rel, base+".sql"), Data: []byte(file +
				gooseUp + "\n" + u.gooseSection(up) + "\n" + gooseDown + "\n" + u.gooseSection(down))})
		case formatTern:
			if u.noTx {
				up, down = ternNoTx+"\n"+up, ternNoTx+"\n"+down
			}
			plan.newFiles = append(plan.newFiles, File{Path: path.Join(rel, base+".sql"), Data: []byte(head + up + "\n" + ternSeparator + "\n\n" + down)})
		default: // plain and golang-migrate share the up/down file pair.
			plan.newFiles = append(plan.newFiles,
				File{Path: path.Join(rel, base+".up.sql"), Data: []byte(head + up)},
				File{Path: path.Join(rel, base+".down.sql"), Data: []byte(SQLHeader + "\n\n" + down)})
		}
		plan.all = append(plan.all, migration{Version: version, Name: base, Up: upSection(up, cfg.Migrations.Format)})
	}
	return plan, nil
}

// render returns the SQL of one direction of u: its statements, after the
// lock_timeout of a transactional unit of an update migration or the
// markers of a non-transactional unit. Formats whose tool runs a
// non-transactional file statement by statement (goose, tern) first drop
// what a failed concurrent build left of an index, so the file can simply
// be run again; golang-migrate runs a file as one query, which must then be
// one statement, and skipjack's own applier repairs such an index itself.
func (u unit) render(stmts []string, update bool, format string) string {
	if len(stmts) == 0 {
		return nothingToDo + "\n"
	}
	var parts []string
	switch {
	case u.noTx:
		parts = append(parts, noTxComment+"\n"+squawkNoLock)
		for _, s := range stmts {
			if idx, ok := concurrentBuild(s); ok && (format == formatGoose || format == formatTern) {
				parts = append(parts, "DROP INDEX CONCURRENTLY IF EXISTS "+idx+";")
			}
			parts = append(parts, s)
		}
	case update:
		timeout := schema.LockTimeout
		if u.own {
			timeout = schema.ValidateLockTimeout
		}
		parts = append(append(parts, fmt.Sprintf("SET LOCAL lock_timeout = %s;", schema.QuoteLiteral(timeout))), stmts...)
	default:
		parts = stmts
	}
	return strings.Join(parts, "\n\n") + "\n"
}

// gooseSection wraps one direction of u for goose: a transactional unit
// is one goose statement (its SQL may hold dollar-quoted bodies with
// semicolons); goose splits a non-transactional one at its semicolons and
// runs each statement on its own.
func (u unit) gooseSection(sql string) string {
	if u.noTx || strings.TrimSpace(sql) == nothingToDo {
		return sql
	}
	return gooseBegin + "\n" + sql + gooseEnd + "\n"
}

var concurrentIndex = regexp.MustCompile(`^CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS ("(?:[^"]|"")+") ON ("(?:[^"]|"")+")\.`)

// concurrentBuild returns the schema-qualified quoted name of the index
// that stmt builds concurrently, if it does.
func concurrentBuild(stmt string) (string, bool) {
	m := concurrentIndex.FindStringSubmatch(stmt)
	if m == nil {
		return "", false
	}
	return m[2] + "." + m[1], true
}

// tableStep is a step of one queue table's change; table is "" for the
// creation of a new table, which nothing uses yet.
type tableStep struct {
	table string
	schema.Step
}

// group splits steps into units: InTransaction steps next to each other
// share a unit if they change the same live table (or create new ones), an
// OwnTransaction step and every NoTransaction step get one of their own. A
// transaction never spans two live tables: one holding a lock on the first
// while it waits for a lock on the second would stall the first's
// producers. A unit's down undoes its steps in reverse order.
func group(steps []tableStep) []unit {
	var units []unit
	var stepsOf [][]schema.Step
	open, live := false, "" // the last unit takes InTransaction steps of table live ("": any)
	for _, s := range steps {
		if s.Kind == schema.InTransaction && open && (s.table == "" || live == "" || live == s.table) {
			stepsOf[len(stepsOf)-1] = append(stepsOf[len(stepsOf)-1], s.Step)
			live = cmp.Or(live, s.table)
			continue
		}
		units = append(units, unit{noTx: s.Kind == schema.NoTransaction, own: s.Kind == schema.OwnTransaction})
		stepsOf = append(stepsOf, []schema.Step{s.Step})
		open, live = s.Kind == schema.InTransaction, s.table
	}
	for i, ss := range stepsOf {
		for j, s := range ss {
			units[i].up = append(units[i].up, s.Up...)
			units[i].down = append(units[i].down, ss[len(ss)-1-j].Down...)
		}
	}
	return units
}

// diffState returns the units that bring the database from the recorded
// state last (nil before the first migration) to the YAML's state want,
// and a name for the migration; no units when nothing changed.
func diffState(cfg *config.Config, last *state, want state) (units []unit, name string, err error) {
	if last == nil {
		last = &state{Schema: cfg.Schema}
	} else if last.Schema != cfg.Schema {
		diags := diagnostics{file: cfg.Path}
		diags.addf(cfg.SchemaPos, "schema changed from %q to %q after migrations were generated; moving queue tables between schemas is not supported",
			last.Schema, cfg.Schema)
		return nil, "", diags.err()
	}
	prev := last.tablesByName()
	declared := map[string]config.Queue{}
	for _, q := range cfg.Queues {
		declared[q.Name] = q
	}
	var steps []tableStep
	var changes []string
	created := false
	for _, t := range want.Tables {
		old, ok := prev[t.Name]
		if !ok {
			ddl, err := schema.Create(t)
			if err != nil {
				return nil, "", err
			}
			steps = append(steps, tableStep{"", schema.Step{Up: []string{strings.TrimSuffix(ddl, "\n")}, Down: []string{strings.TrimSuffix(schema.Drop(t), "\n")}}})
			changes = append(changes, "add_"+t.Name)
			created = true
			continue
		}
		fwd, err := schema.AlterSteps(old, t)
		if err != nil {
			return nil, "", err
		}
		if len(fwd) == 0 {
			continue
		}
		for _, s := range fwd {
			steps = append(steps, tableStep{t.Name, s})
		}
		changes = append(changes, "alter_"+t.Name)
	}
	var diags diagnostics
	diags.file = cfg.Path
	for _, t := range last.Tables {
		if q, ok := declared[t.Name]; ok && !q.Dropped {
			continue
		} else if !ok {
			diags.addf(cfg.QueuesPos, "queue %s has a table created by an earlier migration but is no longer declared; declare it with dropped: true to drop its table", t.Name)
			continue
		}
		ddl, err := schema.Create(t)
		if err != nil {
			return nil, "", err
		}
		steps = append(steps, tableStep{t.Name, schema.Step{Up: []string{strings.TrimSuffix(schema.Drop(t), "\n")}, Down: []string{strings.TrimSuffix(ddl, "\n")}}})
		changes = append(changes, "drop_"+t.Name)
	}
	if err := diags.err(); err != nil {
		return nil, "", err
	}
	wfShared, wfSteps, wfChanges := workflowSteps(cfg.Schema, last, want, prev)
	steps = append(steps, wfSteps...)
	changes = append(changes, wfChanges...)
	// The per-schema tables of layouts 4 (workers), 5 (queues, counts) and 6
	// (busy keys) come first: new tables, which nothing reads or locks yet.
	var shared []tableStep
	for _, t := range schemaTables {
		if layoutAtLeast(want.Tables, t.layout) && !layoutAtLeast(last.Tables, t.layout) {
			shared = append(shared, tableStep{"", schema.Step{
				Up:   []string{strings.TrimSuffix(t.create(cfg.Schema), "\n")},
				Down: []string{strings.TrimSuffix(t.drop(cfg.Schema), "\n")},
			}})
			if len(last.Tables) > 0 {
				changes = append(changes, t.change)
			}
		}
	}
	shared = append(shared, wfShared...)
	if len(shared) > 0 {
		steps = append(shared, steps...)
		created = true
	}
	if len(steps) == 0 {
		return nil, "", nil
	}
	name = "skipjack_update"
	switch {
	case len(last.Tables) == 0:
		name = firstMigration
	case len(changes) == 1:
		name = "skipjack_" + changes[0]
	}
	units = group(steps)
	if created && !units[0].noTx {
		units[0].up = append([]string{fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s;", schema.QuoteIdent(cfg.Schema))}, units[0].up...)
	}
	return units, name, nil
}

// schemaTables are the tables a schema holds once for all its queues, by
// the layout that added them, with the change name of the migration that
// adds them to an existing schema.
var schemaTables = []struct {
	layout       int
	change       string
	create, drop func(schema string) string
}{
	{4, "add_workers", schema.CreateWorkers, schema.DropWorkers},
	{5, "add_queues", schema.CreateQueues, schema.DropQueues},
	{5, "add_counts", schema.CreateCounts, schema.DropCounts},
	{6, "add_busy", schema.CreateBusy, schema.DropBusy},
}

// layoutAtLeast reports whether any of tables is of the given layout or
// later.
func layoutAtLeast(tables []schema.Table, layout int) bool {
	for _, t := range tables {
		if t.Layout >= layout {
			return true
		}
	}
	return false
}

// readMigrations reads the generated migrations in dir (files whose line 1
// is the skipjack header and that record a state), returning them in version
// order, the state of the last one and the highest version of any migration
// file in dir, generated or not.
func readMigrations(dir, format string) ([]migration, *state, int, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read migrations: %w", err)
	}
	var (
		out         []migration
		last        *state
		lastVersion int
		maxVersion  int
	)
	for _, e := range entries {
		m := versionPrefix.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		version, _ := strconv.Atoi(m[1])
		maxVersion = max(maxVersion, version)
		if strings.HasSuffix(e.Name(), ".down.sql") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read migrations: %w", err)
		}
		text := string(data)
		if !strings.HasPrefix(text, SQLHeader+"\n"+stateMarker) {
			continue
		}
		line, rest, _ := strings.Cut(strings.TrimPrefix(text, SQLHeader+"\n"+stateMarker), "\n")
		var st state
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			return nil, nil, 0, fmt.Errorf("migration %s: unreadable state line: %w", e.Name(), err)
		}
		name := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".sql"), ".up")
		body := strings.TrimLeft(rest, "\n")
		down, err := downSection(dir, name, body, format)
		if err != nil {
			return nil, nil, 0, err
		}
		out = append(out, migration{Version: version, Name: name, Up: upSection(body, format), Down: down})
		if last == nil || version > lastVersion {
			last, lastVersion = &st, version
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, last, maxVersion, nil
}

// downSection returns the down SQL of the migration name whose up file's
// body is body: the .down.sql file beside it (plain, golang-migrate; "" when
// it is missing), or the part of body after the format's separator (goose,
// tern), without the tool's own markers, which skipjack's applier does not
// read (goose's StatementBegin/End; a non-transactional unit keeps
// NoTransactionMarker, which it does read).
func downSection(dir, name, body, format string) (string, error) {
	switch format {
	case formatGoose:
		_, down, _ := strings.Cut(body, gooseDown+"\n")
		down = strings.Replace(down, gooseBegin+"\n", "", 1)
		down = strings.Replace(down, gooseEnd+"\n", "", 1)
		return down, nil
	case formatTern:
		_, down, _ := strings.Cut(body, "\n"+ternSeparator+"\n")
		down = strings.TrimLeft(down, "\n")
		return strings.TrimPrefix(down, ternNoTx+"\n"), nil
	}
	data, err := os.ReadFile(filepath.Join(dir, name+".down.sql"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read migrations: %w", err)
	}
	return strings.TrimLeft(strings.TrimPrefix(string(data), SQLHeader+"\n"), "\n"), nil
}

// upSection extracts the up SQL of a migration file's body.
func upSection(body, format string) string {
	switch format {
	case formatGoose:
		if rest, ok := strings.CutPrefix(body, gooseNoTx+"\n"+gooseUp+"\n"); ok {
			// planMigrations writes up + "\n" + gooseDown.
			body, _, _ = strings.Cut(rest, "\n"+gooseDown+"\n")
			break
		}
		body = strings.TrimPrefix(body, gooseUp+"\n"+gooseBegin+"\n")
		body, _, _ = strings.Cut(body, gooseEnd+"\n\n"+gooseDown)
	case formatTern:
		// planMigrations writes up + "\n" + ternSeparator: cutting at the
		// first "\n"+ternSeparator gives up back byte for byte, so the
		// migrate.go of the next run equals the one written with the file.
		body, _, _ = strings.Cut(body, "\n"+ternSeparator)
	}
	return body
}
