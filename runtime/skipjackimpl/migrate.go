package skipjackimpl

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration is one generated migration, embedded in the shared generated
// package of a config.
type Migration struct {
	// Version orders migrations; it is the number in the file name.
	Version int
	// Name is the migration's file name without extension (0001_init).
	Name string
	// Up is the SQL that applies the migration.
	Up string
}

// MigrateParams says which migrations Migrate applies and where it records
// them.
type MigrateParams struct {
	// Config is the config's name: it keys the migrations it recorded.
	Config string
	// Schema is the Postgres schema of the config's queue tables; the
	// tracking table lives there too.
	Schema string
	// Migrations are all of the config's migrations, in any order.
	Migrations []Migration
}

// Migrate applies the migrations of p that the database has not recorded
// yet, in version order, each in its own transaction together with its
// tracking row in "<Schema>"."_skipjack_migrations". It holds a session
// advisory lock keyed by a hash of "skipjack:"+Config on one pooled
// connection while it works, so that many processes may call it at once:
// one applies, the others wait and then find nothing left to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) error {
	return migrate(ctx, pool, p)
}

// lockKey returns the advisory lock key of name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

func migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) error {
	if p.Config == "" || p.Schema == "" {
		return fmt.Errorf("migrate: MigrateParams needs Config and Schema")
	}
	ms := slices.Clone(p.Migrations)
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return fmt.Errorf("migrate %s: migrations %s and %s share version %d", p.Config, ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: acquire connection: %w", p.Config, err)
	}
	defer conn.Release()
	key := lockKey("skipjack:" + p.Config)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Conn().Close(context.Background()) // never return a connection that may hold the lock
		return fmt.Errorf("migrate %s: advisory lock: %w", p.Config, err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			conn.Conn().Close(uctx) // closing the session releases the lock
		}
	}()

	table := pgx.Identifier{p.Schema, "_skipjack_migrations"}.Sanitize()
	if err := ensureTrackingTable(ctx, conn.Conn(), p.Schema, table); err != nil {
		return fmt.Errorf("migrate %s: %w", p.Config, err)
	}
	applied := make(map[int]bool)
	rows, err := conn.Query(ctx, "SELECT version FROM "+table+" WHERE config = $1", p.Config)
	if err != nil {
		return fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	for _, v := range versions {
		applied[int(v)] = true
	}

	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.Up); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" (config, version, name) VALUES ($1, $2, $3)", p.Config, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %s: %w", p.Config, m.Name, err)
		}
	}
	return nil
}

// ensureTrackingTable creates the schema and the tracking table if they
// are missing. Configs sharing a schema hold different config locks, so
// the creation is serialized by a second, transaction-scoped lock on the
// schema.
func ensureTrackingTable(ctx context.Context, conn *pgx.Conn, schema, table string) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("skipjack:schema:"+schema)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
    config text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (config, version)
)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create tracking table %s: %w", table, err)
	}
	return nil
}
