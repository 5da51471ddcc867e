package skipjack

import (
	"context"

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
// yet, each in its own transaction, under an advisory lock keyed by the
// config's name so that many processes may call it at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) error {
	return migrate(ctx, pool, p)
}
