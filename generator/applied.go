package generator

import (
	"path"
	"path/filepath"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// Migration is one generated migration as skipjack migrate and the
// generated Migrate apply it.
type Migration struct {
	// Version is the number that starts the file name.
	Version int
	// Name is the file name without extension (0001_skipjack_init).
	Name string
	// Up is the SQL that applies it: the up part of the file, after the
	// header and the state line.
	Up string
	// Down is the SQL that undoes it: the .down.sql file (plain,
	// golang-migrate) or the down part of the file (goose, tern), without
	// the tool's markers; empty when there is none.
	Down string
}

// Migrations reads the generated migrations of cfg's migrations folder, in
// version order, and returns them with the paths (relative to the config's
// folder) of the migration files the YAML needs that are not generated yet.
// It needs neither sqlc nor the Go module: only the YAML and the folder.
func Migrations(cfg *config.Config) (existing []Migration, missing []string, err error) {
	dir := filepath.Join(cfg.Dir, filepath.FromSlash(cfg.Migrations.Dir))
	read, _, _, err := readMigrations(dir, cfg.Migrations.Format)
	if err != nil {
		return nil, nil, err
	}
	for _, m := range read {
		existing = append(existing, Migration(m))
	}
	plan, err := planMigrations(cfg, buildModel(cfg).state, false)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range plan.newFiles {
		missing = append(missing, path.Clean(f.Path))
	}
	return existing, missing, nil
}
