package generator

import (
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
}

// state is what a migration records: the tables after it.
type state struct {
	Schema string         `json:"schema"`
	Tables []schema.Table `json:"tables"`
}

// migrationPlan is the existing generated migrations plus the one the YAML
// needs now, if any.
type migrationPlan struct {
	all      []migration // every generated migration, in version order
	newFiles []File
}

var versionPrefix = regexp.MustCompile(`^(\d+)_`)

// planMigrations reads the migrations folder and plans the migration that
// brings the database from the last recorded state to the YAML's.
func planMigrations(cfg *config.Config, want state) (*migrationPlan, error) {
	dir := filepath.Join(cfg.Dir, filepath.FromSlash(cfg.Migrations.Dir))
	existing, last, maxVersion, err := readMigrations(dir, cfg.Migrations.Format)
	if err != nil {
		return nil, err
	}
	plan := &migrationPlan{all: existing}
	up, down, name, err := diffState(cfg, last, want)
	if err != nil {
		return nil, err
	}
	if up == "" {
		return plan, nil
	}
	version := maxVersion + 1
	base := fmt.Sprintf("%04d_%s", version, name)
	stateJSON, err := json.Marshal(want)
	if err != nil {
		return nil, fmt.Errorf("encode migration state: %w", err)
	}
	head := SQLHeader + "\n" + stateMarker + string(stateJSON) + "\n\n"
	rel := path.Clean(cfg.Migrations.Dir)
	switch cfg.Migrations.Format {
	case formatGoose:
		plan.newFiles = []File{{Path: path.Join(rel, base+".sql"), Data: []byte(head +
			gooseUp + "\n" + gooseBegin + "\n" + up + gooseEnd + "\n\n" +
			gooseDown + "\n" + gooseBegin + "\n" + down + gooseEnd + "\n")}}
	case formatTern:
		plan.newFiles = []File{{Path: path.Join(rel, base+".sql"), Data: []byte(head + up + "\n" + ternSeparator + "\n\n" + down)}}
	default: // plain and golang-migrate share the up/down file pair.
		plan.newFiles = []File{
			{Path: path.Join(rel, base+".up.sql"), Data: []byte(head + up)},
			{Path: path.Join(rel, base+".down.sql"), Data: []byte(SQLHeader + "\n\n" + down)},
		}
	}
	plan.all = append(plan.all, migration{Version: version, Name: base, Up: up})
	return plan, nil
}

// diffState returns the up and down SQL from the recorded state last (nil
// before the first migration) to the YAML's state want, and a name for the
// migration; up is "" when nothing changed.
func diffState(cfg *config.Config, last *state, want state) (up, down, name string, err error) {
	if last == nil {
		last = &state{Schema: cfg.Schema}
	} else if last.Schema != cfg.Schema {
		diags := diagnostics{file: cfg.Path}
		diags.addf(cfg.SchemaPos, "schema changed from %q to %q after migrations were generated; moving queue tables between schemas is not supported",
			last.Schema, cfg.Schema)
		return "", "", "", diags.err()
	}
	prev := map[string]schema.Table{}
	for _, t := range last.Tables {
		prev[t.Name] = t
	}
	declared := map[string]config.Queue{}
	for _, q := range cfg.Queues {
		declared[q.Name] = q
	}
	var ups, downs, changes []string
	for _, t := range want.Tables {
		old, ok := prev[t.Name]
		if !ok {
			ddl, err := schema.Create(t)
			if err != nil {
				return "", "", "", err
			}
			ups = append(ups, ddl)
			downs = append(downs, schema.Drop(t))
			changes = append(changes, "add_"+t.Name)
			continue
		}
		fwd, err := schema.Alter(old, t)
		if err != nil {
			return "", "", "", err
		}
		if fwd == "" {
			continue
		}
		back, err := schema.Alter(t, old)
		if err != nil {
			return "", "", "", err
		}
		ups, downs = append(ups, fwd), append(downs, back)
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
			return "", "", "", err
		}
		ups = append(ups, schema.Drop(t))
		downs = append(downs, ddl)
		changes = append(changes, "drop_"+t.Name)
	}
	if err := diags.err(); err != nil {
		return "", "", "", err
	}
	if needsWorkers(want.Tables) && !needsWorkers(last.Tables) {
		// Layout 4's workers table, one per schema: a new table, which
		// nothing reads or locks yet.
		ups = append([]string{schema.CreateWorkers(cfg.Schema)}, ups...)
		downs = append([]string{schema.DropWorkers(cfg.Schema)}, downs...)
		if len(last.Tables) > 0 {
			changes = append(changes, "add_workers")
		}
	}
	if len(ups) == 0 {
		return "", "", "", nil
	}
	name = "skipjack_update"
	switch {
	case len(last.Tables) == 0:
		name = firstMigration
	case len(changes) == 1:
		name = "skipjack_" + changes[0]
	}
	up = fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s;\n\n", schema.QuoteIdent(cfg.Schema)) + strings.Join(ups, "\n")
	// Down undoes the changes in reverse order.
	for i, j := 0, len(downs)-1; i < j; i, j = i+1, j-1 {
		downs[i], downs[j] = downs[j], downs[i]
	}
	return up, strings.Join(downs, "\n"), name, nil
}

// needsWorkers reports whether any of tables is of layout 4 or later, whose
// workers need the schema's workers table.
func needsWorkers(tables []schema.Table) bool {
	for _, t := range tables {
		if t.Layout >= 4 {
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
		out = append(out, migration{Version: version, Name: name, Up: upSection(strings.TrimLeft(rest, "\n"), format)})
		if last == nil || version > lastVersion {
			last, lastVersion = &st, version
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, last, maxVersion, nil
}

// upSection extracts the up SQL of a migration file's body.
func upSection(body, format string) string {
	switch format {
	case formatGoose:
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
