package migrationtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	gomigrate "github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	_ "github.com/golang-migrate/migrate/v4/source/file" // file:// sources
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	ternmigrate "github.com/jackc/tern/v2/migrate"
	"github.com/pressly/goose/v3"
)

// A migrationTool applies a migrations folder with a format's real tool,
// through the tool's Go library.
type migrationTool struct {
	// name names the tool in test output.
	name string
	// up applies every pending up migration of dir.
	up func(ctx context.Context, dbURL, dir string) error
	// downTo applies down migrations until version is the last one applied
	// (0: none).
	downTo func(ctx context.Context, dbURL, dir string, version int) error
}

// golangMigrate runs golang-migrate with its pgx/v5 driver, on the
// NNNN_name.up.sql/.down.sql pairs of the plain and golang-migrate formats.
var golangMigrate = migrationTool{
	name: "golang-migrate",
	up: func(ctx context.Context, dbURL, dir string) error {
		return withGolangMigrate(dbURL, dir, func(m *gomigrate.Migrate) error {
			if err := m.Up(); err != nil && !errors.Is(err, gomigrate.ErrNoChange) {
				return err
			}
			return nil
		})
	},
	downTo: func(ctx context.Context, dbURL, dir string, version int) error {
		return withGolangMigrate(dbURL, dir, func(m *gomigrate.Migrate) error {
			if version == 0 {
				return m.Down()
			}
			return m.Migrate(uint(version))
		})
	},
}

func withGolangMigrate(dbURL, dir string, f func(*gomigrate.Migrate) error) error {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	driver, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		return fmt.Errorf("golang-migrate driver: %w", err)
	}
	m, err := gomigrate.NewWithDatabaseInstance("file://"+dir, "pgx5", driver)
	if err != nil {
		return fmt.Errorf("golang-migrate: %w", err)
	}
	defer m.Close()
	return f(m)
}

// gooseTool runs goose's Provider on the -- +goose Up/Down files.
var gooseTool = migrationTool{
	name: "goose",
	up: func(ctx context.Context, dbURL, dir string) error {
		return withGoose(dbURL, dir, func(p *goose.Provider) error {
			_, err := p.Up(ctx)
			return err
		})
	},
	downTo: func(ctx context.Context, dbURL, dir string, version int) error {
		return withGoose(dbURL, dir, func(p *goose.Provider) error {
			_, err := p.DownTo(ctx, int64(version))
			return err
		})
	},
}

func withGoose(dbURL, dir string, f func(*goose.Provider) error) error {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(dir))
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	defer p.Close()
	return f(p)
}

// ternTool runs tern's Migrator on the files split by
// "---- create above / drop below ----".
var ternTool = migrationTool{
	name: "tern",
	up: func(ctx context.Context, dbURL, dir string) error {
		return withTern(ctx, dbURL, dir, func(m *ternmigrate.Migrator) error { return m.Migrate(ctx) })
	},
	downTo: func(ctx context.Context, dbURL, dir string, version int) error {
		return withTern(ctx, dbURL, dir, func(m *ternmigrate.Migrator) error { return m.MigrateTo(ctx, int32(version)) })
	},
}

func withTern(ctx context.Context, dbURL, dir string, f func(*ternmigrate.Migrator) error) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	m, err := ternmigrate.NewMigrator(ctx, conn, "public.schema_version")
	if err != nil {
		return fmt.Errorf("tern: %w", err)
	}
	if err := m.LoadMigrations(os.DirFS(dir)); err != nil {
		return fmt.Errorf("tern: load migrations: %w", err)
	}
	return f(m)
}
