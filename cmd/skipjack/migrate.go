package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// migrate applies the config's pending migrations from its migrations
// folder with the runtime's applier, the code the generated Migrate runs:
// it needs the YAML, the folder and the database, and no Go toolchain. It
// refuses to run while the YAML needs a migration that is not generated,
// and names every migration it applied.
func migrate(o options, e env) error {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(o.file)
	if err != nil {
		return err
	}
	ms, missing, err := generator.Migrations(cfg)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("the YAML needs migrations that are not generated (%s); run skipjack generate -f %s first", strings.Join(missing, ", "), o.file)
	}
	pool, err := migratePool(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	p := skipjackimpl.MigrateParams{Config: cfg.Name, Schema: cfg.Schema}
	for _, m := range ms {
		p.Migrations = append(p.Migrations, skipjackimpl.Migration(m))
	}
	applied, err := skipjackimpl.Apply(ctx, pool, p)
	// What was applied comes first, also when a later migration failed.
	for _, m := range applied {
		fmt.Fprintf(e.stdout, "skipjack migrate: applied %s\n", m.Name)
	}
	if err != nil {
		return err
	}
	took := time.Since(start).Round(time.Millisecond)
	if len(applied) == 0 {
		fmt.Fprintf(e.stdout, "skipjack migrate: %s is up to date (schema %s), nothing to apply (%v)\n", cfg.Name, cfg.Schema, took)
	} else {
		fmt.Fprintf(e.stdout, "skipjack migrate: %s applied to %s (schema %s) in %v\n", plural(len(applied), "migration"), cfg.Name, cfg.Schema, took)
	}
	if cfg.Migrations.Format != "plain" {
		fmt.Fprintf(e.stdout, "skipjack migrate: applied with skipjack's own tracking (%s.%s), not %s's: on one database, use either skipjack migrate or %s\n",
			cfg.Schema, "_skipjack_migrations", cfg.Migrations.Format, cfg.Migrations.Format)
	}
	return nil
}

// migratePool connects to dbURL for migrate. Its statements are sent
// without named prepared statements (QueryExecModeExec) unless the URL asks
// for a mode, so migrate works through PgBouncer in transaction mode; it
// needs two connections, one holding the migration lock while the other
// builds an index concurrently.
func migratePool(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	if dbURL == "" {
		return nil, fmt.Errorf("no database: pass --database-url or set DATABASE_URL")
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	if !strings.Contains(dbURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	cfg.MaxConns = max(cfg.MaxConns, 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return pool, nil
}
