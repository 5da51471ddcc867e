// Package generator turns a loaded skipjack.yaml into every file skipjack
// generates: the migrations, the sqlc inputs and sqlc's Go code for each
// queue, the typed queue packages and the shared package.
//
// The pipeline reads top to bottom: config (package config) -> model
// (names, imports, types) -> render (packages templates, schema, queries)
// -> sqlc -> format -> write or check. Generate is pure apart from reading
// the module's go.mod, the Go packages of external payload types, the
// existing migrations and running sqlc in a temporary folder: it returns the
// files and touches nothing. Write and Check decide what to do with them.
package generator

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skipjack-dev/skipjack/generator/compat"
	"github.com/skipjack-dev/skipjack/generator/config"
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
	plan, err := planMigrations(cfg, m.state)
	if err != nil {
		return nil, err
	}

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

// gen holds the state of one Generate run.
type gen struct {
	cfg       *config.Config
	out       string
	outImport string
	sharedPkg string
	external  map[string]external
	files     []File
}

func (g *gen) add(p string, data []byte) {
	g.files = append(g.files, File{Path: p, Data: data})
}

// format gofmts every Go file; a template bug shows the offending source
// with line numbers.
func (g *gen) format() error {
	for i, f := range g.files {
		if !strings.HasSuffix(f.Path, ".go") {
			continue
		}
		src, err := format.Source(f.Data)
		if err != nil {
			return fmt.Errorf("format generated %s: %v\n%s", f.Path, err, numbered(f.Data))
		}
		g.files[i].Data = src
	}
	return nil
}

// numbered returns src with line numbers, for error messages.
func numbered(src []byte) string {
	var b strings.Builder
	for i, line := range bytes.Split(src, []byte("\n")) {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
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
	return importPath, pkg
}
