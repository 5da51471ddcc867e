// Package generator turns a loaded skipjack.yaml into every file skipjack
// generates: the migrations, the sqlc inputs and sqlc's Go code for each
// queue, the typed queue packages and the shared package.
//
// Generate runs the pipeline in one direction. It calls the steps in this
// order, and each step refers only to the steps above it and to the leaves:
//
//	config      package config: load and validate the YAML
//	module      module.go: the import path of out, from the nearest go.mod
//	compat      package compat: refuse payload changes that break queued jobs
//	resolve     resolve.go: check external payload types with go/packages
//	model       model.go: each live queue's table and queries, built once
//	migrations  migrations.go: plan the migrations the model's state needs
//	sqlc        sqlc.go, sqlcdoc.go: run sqlc once for all queues, document its code
//	render      render.go, gotypes.go: the template models of the Go files
//	format      format.go: gofmt every Go file
//	write/check output.go: Write and Check, the only steps that touch out
//
// The leaves are files.go (the headers that mark a file as generated, File
// and Output), diagnostics.go (positioned errors) and diff.go. Generate is
// pure apart from reading the module's go.mod, the Go packages of external
// payload types, the lock file, the existing migrations and running sqlc in
// a temporary folder: it returns the files and touches nothing. Write and
// Check decide what to do with them. QueueSQLs and Migrations give the
// CLI's database commands the model's SQL and migrations without running
// the rest.
package generator

import (
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skipjack-dev/skipjack/generator/compat"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
	"github.com/skipjack-dev/skipjack/templates"
)

// Options configures Generate.
type Options struct {
	// SQLC runs `sqlc generate` with the sqlc.yaml in dir. cmd/skipjack
	// passes sqlcrun.Runner, which runs sqlc in a child process.
	SQLC func(dir string) error
	// AllowBreaking generates even when the YAML changes payloads in ways
	// that break jobs already queued (see package compat); Output.AllowedBreaking
	// lists what it allowed. Without it such changes are errors.
	AllowBreaking bool
	// Contract plans the contract steps of changes rolled out in two
	// steps (a serial key added to a live queue: see settleSerial), to be
	// run once no process of the release before the expansion runs.
	Contract bool
}

// Generate renders every file of cfg. Errors about the config are returned
// together as config.Errors, positioned in the YAML file.
func Generate(cfg *config.Config, opts Options) (*Output, error) {
	diags := &diagnostics{file: cfg.Path}
	outDir := filepath.Join(cfg.Dir, filepath.FromSlash(cfg.Out))
	outImport, sharedPkg := locateOut(cfg, outDir, diags)
	allowed, err := checkCompat(cfg, opts.AllowBreaking, diags)
	if err != nil {
		return nil, err
	}
	if err := diags.err(); err != nil {
		return nil, err
	}
	ext := resolveExternal(cfg, diags)
	if err := diags.err(); err != nil {
		return nil, err
	}
	m := buildModel(cfg)
	plan, err := planMigrations(cfg, m.state, opts.Contract)
	if err != nil {
		return nil, err
	}
	m.settle(plan.state)

	g := &gen{cfg: cfg, out: path.Clean(cfg.Out), outImport: outImport, sharedPkg: sharedPkg, external: ext}
	sqlcFiles, err := runSQLC(cfg.Schema, g.out, m.queues, opts.SQLC)
	if err != nil {
		return nil, err
	}
	for _, f := range sqlcFiles {
		g.add(f.Path, f.Data)
	}
	for _, qm := range m.queues {
		data, err := templates.Execute(templates.Queue, g.queueFile(qm))
		if err != nil {
			return nil, err
		}
		g.add(path.Join(g.out, qm.cfg.Package, "queue.go"), data)
	}
	tables := make(map[string]schema.Table, len(m.queues))
	for _, qm := range m.queues {
		tables[qm.cfg.Name] = qm.table
	}
	for i := range cfg.Workflows {
		wf := &cfg.Workflows[i]
		data, err := templates.Execute(templates.Workflow, g.workflowFile(wf, tables))
		if err != nil {
			return nil, err
		}
		g.add(path.Join(g.out, wf.Package, "workflow.go"), data)
	}
	if len(cfg.Types) > 0 {
		data, err := templates.Execute(templates.Types, g.typesFile())
		if err != nil {
			return nil, err
		}
		g.add(path.Join(g.out, "types.go"), data)
	}
	data, err := templates.Execute(templates.Migrate, g.migrateFile(plan))
	if err != nil {
		return nil, err
	}
	g.add(path.Join(g.out, "migrate.go"), data)
	g.add(compat.Lock(cfg))

	if err := g.format(); err != nil {
		return nil, err
	}
	sort.Slice(g.files, func(i, j int) bool { return g.files[i].Path < g.files[j].Path })
	return &Output{
		Out:             g.out,
		Import:          outImport,
		Files:           g.files,
		Migrations:      path.Clean(cfg.Migrations.Dir),
		NewMigrations:   plan.newFiles,
		AllowedBreaking: allowed,
		Rollout:         notes(cfg, plan.rollout),
	}, nil
}

// checkCompat compares cfg with its lock file. Without allow it reports
// every breaking change to diags; with it, it returns them.
func checkCompat(cfg *config.Config, allow bool, diags *diagnostics) (config.Errors, error) {
	changes, err := compat.Breaking(cfg)
	if err != nil {
		return nil, err
	}
	var allowed config.Errors
	for _, ch := range changes {
		if allow {
			allowed = append(allowed, config.Error{File: cfg.Path, Line: ch.Pos.Line, Col: ch.Pos.Col, Msg: "allowed breaking change: " + ch.Msg})
		} else {
			diags.add(ch.Pos, "breaking change: "+ch.Msg+" (or pass --allow-breaking)")
		}
	}
	return allowed, nil
}

// locateOut finds the import path and package name of out.
func locateOut(cfg *config.Config, outDir string, diags *diagnostics) (importPath, pkg string) {
	mod, err := findModule(cfg.Dir)
	if err != nil {
		diags.add(cfg.OutPos, err.Error())
		return "", ""
	}
	importPath, err = mod.importPath(outDir)
	if err != nil {
		diags.add(cfg.OutPos, err.Error())
		return "", ""
	}
	pkg = path.Base(importPath)
	if !token.IsIdentifier(pkg) || token.IsKeyword(pkg) || pkg != strings.ToLower(pkg) {
		diags.addf(cfg.OutPos, "out folder %q is not a valid Go package name; use a lower-case name such as jobs", pkg)
	}
	for _, q := range cfg.Queues {
		if q.Package == pkg {
			diags.addf(q.Pos, "queue package %s has the same name as the out package; rename the queue or out", q.Package)
		}
	}
	for _, wf := range cfg.Workflows {
		if wf.Package == pkg {
			diags.addf(wf.Pos, "workflow package %s has the same name as the out package; rename the workflow or out", wf.Package)
		}
	}
	return importPath, pkg
}
