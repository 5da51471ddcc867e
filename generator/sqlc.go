package generator

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/skipjack-dev/skipjack/queries"
	"github.com/skipjack-dev/skipjack/schema"
)

// sqlcOverrides keeps pgtype out of the generated code: timestamps become
// time.Time, intervals time.Duration, nullable ones pointers.
const sqlcOverrides = `        overrides:
          - {db_type: timestamptz, go_type: time.Time}
          - {db_type: timestamptz, nullable: true, go_type: {type: time.Time, pointer: true}}
          - {db_type: pg_catalog.timestamptz, go_type: time.Time}
          - {db_type: pg_catalog.timestamptz, nullable: true, go_type: {type: time.Time, pointer: true}}
          - {db_type: interval, go_type: time.Duration}
          - {db_type: interval, nullable: true, go_type: {type: time.Duration, pointer: true}}
          - {db_type: pg_catalog.interval, go_type: time.Duration}
          - {db_type: pg_catalog.interval, nullable: true, go_type: {type: time.Duration, pointer: true}}
          - {db_type: text, nullable: true, go_type: {type: string, pointer: true}}
`

// runSQLC writes the sqlc inputs of every live queue to a temporary folder,
// runs sqlc once for all of them and returns its inputs and outputs as files
// under <out>/<pkg>/internal/db/.
func runSQLC(schemaName, out string, live []queueModel, run func(dir string) error) ([]File, error) {
	if len(live) == 0 {
		return nil, nil
	}
	if run == nil {
		return nil, errors.New("generator: Options.SQLC is not set")
	}
	tmp, err := os.MkdirTemp("", "skipjack-sqlc-")
	if err != nil {
		return nil, fmt.Errorf("sqlc: %w", err)
	}
	defer os.RemoveAll(tmp)

	var files []File
	var yaml strings.Builder
	yaml.WriteString("version: \"2\"\nsql:\n")
	for _, qm := range live {
		q := qm.cfg
		ddl, err := schema.CreateTable(qm.table)
		if err != nil {
			return nil, err
		}
		qs, err := queries.Render(qm.queries)
		if err != nil {
			return nil, err
		}
		inputs := map[string]string{
			"schema.sql":  SQLHeader + "\n\n" + "CREATE SCHEMA IF NOT EXISTS " + schema.QuoteIdent(schemaName) + ";\n\n" + ddl,
			"queries.sql": qs,
		}
		dir := filepath.Join(tmp, q.Package)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlc: %w", err)
		}
		for _, name := range []string{"queries.sql", "schema.sql"} {
			// sqlc reads the comment above a query as its doc comment, so
			// its own input must not start with our header; the copy
			// written under out does, like every generated file.
			if err := os.WriteFile(filepath.Join(dir, name), []byte(inputs[name]), 0o644); err != nil {
				return nil, fmt.Errorf("sqlc: %w", err)
			}
			data := inputs[name]
			if name == "queries.sql" {
				data = SQLHeader + "\n\n" + data
			}
			files = append(files, File{Path: path.Join(out, q.Package, "internal/db", name), Data: []byte(data)})
		}
		fmt.Fprintf(&yaml, "  - engine: postgresql\n    schema: %s/schema.sql\n    queries: %s/queries.sql\n", q.Package, q.Package)
		fmt.Fprintf(&yaml, "    gen:\n      go:\n        package: db\n        out: %s/db\n        sql_package: pgx/v5\n        query_parameter_limit: 8\n", q.Package)
		yaml.WriteString(sqlcOverrides)
	}
	if err := os.WriteFile(filepath.Join(tmp, "sqlc.yaml"), []byte(yaml.String()), 0o644); err != nil {
		return nil, fmt.Errorf("sqlc: %w", err)
	}
	if err := run(tmp); err != nil {
		// Report sqlc's diagnostics against the files as they are written
		// under out, not against the temporary folder.
		msg := strings.ReplaceAll(err.Error(), tmp+string(filepath.Separator), "")
		for i := range live {
			pkg := live[i].cfg.Package
			msg = regexp.MustCompile(`(?m)^`+pkg+`/`).ReplaceAllString(msg, path.Join(out, pkg, "internal/db")+"/")
		}
		return nil, errors.New(strings.ReplaceAll(msg, tmp, "<sqlc>"))
	}
	for _, qm := range live {
		pkg := qm.cfg.Package
		gen, err := readSQLCOutput(filepath.Join(tmp, pkg, "db"))
		if err != nil {
			return nil, err
		}
		for _, f := range gen {
			files = append(files, File{Path: path.Join(out, pkg, "internal/db", f.Path), Data: f.Data})
		}
	}
	return files, nil
}

// readSQLCOutput reads the Go files sqlc wrote to dir and replaces sqlc's
// header (which names its version) with skipjack's.
func readSQLCOutput(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read sqlc output: %w", err)
	}
	var files []File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read sqlc output: %w", err)
		}
		i := strings.Index(string(data), "\npackage ")
		if i < 0 {
			return nil, fmt.Errorf("sqlc output %s has no package clause", e.Name())
		}
		doc, err := documentSQLC(e.Name(), []byte(GoHeader+"\n\n"+sqlcPackageDoc(e.Name())+string(data[i+1:])))
		if err != nil {
			return nil, err
		}
		if e.Name() == "queries.sql.go" {
			if doc, err = addInto(doc); err != nil {
				return nil, err
			}
		}
		files = append(files, File{Path: e.Name(), Data: doc})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// sqlcPackageDoc gives db.go the package's doc comment.
func sqlcPackageDoc(name string) string {
	if name != "db.go" {
		return ""
	}
	return "// Package db is the code sqlc generated from this folder's schema.sql and\n// queries.sql. The queue package above wraps it in a typed API.\n"
}
