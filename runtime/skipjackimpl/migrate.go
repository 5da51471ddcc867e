package skipjackimpl

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

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
// tracking row in "<Schema>"."_skipjack_migrations".
//
// Many processes may call it at once: each migration's transaction first
// takes a transaction-scoped advisory lock keyed by a hash of
// "skipjack:"+Config and then checks, under that lock, that the migration
// is still unrecorded, so exactly one caller applies it and the others
// wait and skip it. Nothing outlives a transaction (no session lock, no
// prepared statement, no SET), so Migrate works through a pooler in
// transaction mode, such as PgBouncer with pool_mode = transaction, as
// well as on a direct connection.
func Migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) error {
	return migrate(ctx, pool, p)
}

// lockTx are the options of every transaction that takes a migration
// lock. Read committed whatever the database's default: under repeatable
// read the snapshot is taken by the first statement, the lock itself, before
// the lock is granted, so a caller that waited would not see the migration
// the holder recorded and would apply it a second time.
var lockTx = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

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

	table := pgx.Identifier{p.Schema, "_skipjack_migrations"}.Sanitize()
	if err := ensureTrackingTable(ctx, pool, p.Schema, table); err != nil {
		return fmt.Errorf("migrate %s: %w", p.Config, err)
	}
	// Reading what is applied without the lock only saves transactions:
	// each migration is checked again under the lock before it is applied.
	rows, err := pool.Query(ctx, "SELECT version FROM "+table+" WHERE config = $1", p.Config)
	if err != nil {
		return fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}

	key := lockKey("skipjack:" + p.Config)
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		err := pgx.BeginTxFunc(ctx, pool, lockTx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
				return fmt.Errorf("advisory lock: %w", err)
			}
			var done bool
			err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+table+" WHERE config = $1 AND version = $2)", p.Config, m.Version).Scan(&done)
			if err != nil || done {
				return err // another caller applied it while this one waited
			}
			if _, err := tx.Exec(ctx, m.Up); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO "+table+" (config, version, name) VALUES ($1, $2, $3)", p.Config, m.Version, m.Name)
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
// the creation is serialized by a transaction-scoped lock on the schema.
func ensureTrackingTable(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	err := pgx.BeginTxFunc(ctx, pool, lockTx, func(tx pgx.Tx) error {
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
