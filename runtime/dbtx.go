package skipjack

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is what a queue's Enqueue, EnqueueMany, Stats and admin functions
// run on: *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it. Inside a
// pgx.Tx, what they write exists only if that transaction commits.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}
