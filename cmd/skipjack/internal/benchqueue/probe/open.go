package probe

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/benchqueue"
	dbgen "github.com/skipjack-dev/skipjack/cmd/skipjack/internal/benchqueue/probe/internal/db"
)

// Open returns the probe queue in schema, where benchqueue.DDL(schema)
// created it: the generated queries, each statement renamed to schema
// before it is sent, and the NOTIFY channel of that schema.
func Open(schema string) *skipjackimpl.Queue[Payload] {
	spec := Spec
	spec.Channel = benchqueue.Rename(Spec.Channel, schema)
	r := &renamer{schema: schema}
	return skipjackimpl.NewQueue[Payload](spec, func(db dbgen.DBTX) *dbgen.Queries {
		return dbgen.New(renamed{db: db, r: r})
	})
}

// renamer renames statements to one schema, remembering each one: the
// generated statements are a few dozen constants.
type renamer struct {
	schema string
	done   sync.Map // generated SQL -> renamed SQL
}

func (r *renamer) sql(s string) string {
	if v, ok := r.done.Load(s); ok {
		return v.(string)
	}
	v := benchqueue.Rename(s, r.schema)
	r.done.Store(s, v)
	return v
}

// renamed is a DBTX that sends the statements of the generated queries
// renamed to the bench's schema.
type renamed struct {
	db dbgen.DBTX
	r  *renamer
}

func (d renamed) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.db.Exec(ctx, d.r.sql(sql), args...)
}

func (d renamed) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.db.Query(ctx, d.r.sql(sql), args...)
}

func (d renamed) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.db.QueryRow(ctx, d.r.sql(sql), args...)
}

func (d renamed) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	renamed := make(pgx.Identifier, len(table))
	for i, part := range table {
		renamed[i] = d.r.sql(part)
	}
	return d.db.CopyFrom(ctx, renamed, columns, src)
}
