package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrationStatus is one migration as Status reports it.
type MigrationStatus struct {
	// Version and Name are the migration's.
	Version int
	Name    string
	// AppliedAt is when it was applied (database clock); nil while it is
	// pending.
	AppliedAt *time.Time
	// Missing is set for a migration the database recorded that p does not
	// hold (a migrations folder older than the database).
	Missing bool
}

// StatusReport is what Status returns.
type StatusReport struct {
	// Migrations are the config's migrations and those the database
	// recorded, in version order.
	Migrations []MigrationStatus
	// Busy is set when another caller held the config's migration lock
	// while Status read: a migrate or a rollback was running, and a
	// migration it works on may be half done.
	Busy bool
}

// Status reports which migrations of p the database recorded, with when,
// and which are pending. It writes nothing: a database without the
// tracking table has every migration pending. It asks for the config's
// migration lock once, without waiting, and reads under it when it gets
// it; when another caller holds it, it reads what that caller committed so
// far and sets Busy.
func Status(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) (StatusReport, error) {
	var rep StatusReport
	if p.Config == "" || p.Schema == "" {
		return rep, errors.New("migrate status: MigrateParams needs Config and Schema")
	}
	table := pgx.Identifier{p.Schema, "_skipjack_migrations"}.Sanitize()
	applied := map[int]MigrationStatus{}
	err := pgx.BeginTxFunc(ctx, pool, lockTx, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", pgx.QueryExecModeSimpleProtocol, lockKey("skipjack:"+p.Config)).Scan(&got); err != nil {
			return fmt.Errorf("advisory lock: %w", err)
		}
		rep.Busy = !got
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT version, name, applied_at FROM "+table+" WHERE config = $1", p.Config)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				v    int32
				name string
				at   time.Time
			)
			if err := rows.Scan(&v, &name, &at); err != nil {
				return err
			}
			applied[int(v)] = MigrationStatus{Version: int(v), Name: name, AppliedAt: &at}
		}
		return rows.Err()
	})
	if err != nil {
		return rep, fmt.Errorf("migrate status %s: read applied migrations: %w", p.Config, err)
	}
	for _, m := range p.Migrations {
		s, ok := applied[m.Version]
		if !ok {
			s = MigrationStatus{Version: m.Version, Name: m.Name}
		}
		delete(applied, m.Version)
		rep.Migrations = append(rep.Migrations, s)
	}
	for _, s := range applied {
		s.Missing = true
		rep.Migrations = append(rep.Migrations, s)
	}
	slices.SortFunc(rep.Migrations, func(a, b MigrationStatus) int { return a.Version - b.Version })
	return rep, nil
}

// RollbackParams says which migrations Rollback undoes.
type RollbackParams struct {
	MigrateParams
	// Steps is how many of the last applied migrations to undo, newest
	// first. Default 1.
	Steps int
	// Force undoes migrations whose down SQL drops a queue table that
	// holds jobs; without it Rollback refuses them.
	Force bool
}

// ErrTableHoldsJobs is the error of a rollback refused because a down
// migration would drop a queue table that holds jobs.
var ErrTableHoldsJobs = errors.New("would drop a queue table that holds jobs")

// Rollback undoes the last p.Steps migrations the database recorded for
// p.Config, newest first, running each one's Down SQL and deleting its
// tracking row; it returns those it undid, also when a later one failed.
//
// It holds the config's migration lock (the one Apply takes, see Apply)
// from start to end, so a migrate and a rollback never interleave: the
// lock's transaction reads which migrations are applied and holds the
// lock, while each down runs beside it, in a transaction of its own
// together with the deletion of its tracking row (or, for a
// non-transactional one, statement by statement and then the deletion).
// The lock's transaction holds no snapshot and no table lock meanwhile,
// so concurrent index drops on the other connection do not wait for it,
// and the pool needs two connections.
//
// Before anything runs, every down SQL that drops a queue table (a table
// whose name does not start with an underscore: skipjack's own tables
// do) is checked: when the table holds a job, in any state, Rollback
// refuses with an error matching ErrTableHoldsJobs unless p.Force is set.
// The check is made again inside the down's transaction, after locking the
// table, so a job enqueued meanwhile is not dropped either. A migration
// without down SQL (a file missing from p) is an error, as is asking to
// undo more migrations than are applied.
func Rollback(ctx context.Context, pool *pgxpool.Pool, p RollbackParams) ([]Migration, error) {
	if p.Config == "" || p.Schema == "" {
		return nil, errors.New("migrate down: MigrateParams needs Config and Schema")
	}
	steps := p.Steps
	if steps == 0 {
		steps = 1
	}
	if steps < 0 {
		return nil, fmt.Errorf("migrate down %s: %d steps, want 1 or more", p.Config, steps)
	}
	if pool.Config().MaxConns < 2 {
		return nil, fmt.Errorf("migrate down %s: the downs run beside the lock's transaction, so the pool needs at least 2 connections (MaxConns is %d)", p.Config, pool.Config().MaxConns)
	}
	byVersion := map[int]Migration{}
	for _, m := range p.Migrations {
		byVersion[m.Version] = m
	}
	table := pgx.Identifier{p.Schema, "_skipjack_migrations"}.Sanitize()
	a := applier{pool: pool, table: table, config: p.Config, key: lockKey("skipjack:" + p.Config)}
	var done []Migration
	err := withLock(ctx, pool, a.key, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.QueryExecModeSimpleProtocol, table).Scan(&exists); err != nil {
			return err
		}
		var versions []int32
		if exists {
			rows, err := tx.Query(ctx, "SELECT version FROM "+table+" WHERE config = $1 ORDER BY version DESC", pgx.QueryExecModeSimpleProtocol, p.Config)
			if err != nil {
				return fmt.Errorf("read applied migrations: %w", err)
			}
			if versions, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
				return fmt.Errorf("read applied migrations: %w", err)
			}
		}
		if len(versions) < steps {
			return fmt.Errorf("%d applied, cannot undo %d", len(versions), steps)
		}
		var undo []Migration
		for _, v := range versions[:steps] {
			m, ok := byVersion[int(v)]
			if !ok {
				return fmt.Errorf("migration %d is applied but not in the migrations folder, so its down SQL is unknown", v)
			}
			if strings.TrimSpace(m.Down) == "" {
				return fmt.Errorf("%s has no down SQL", m.Name)
			}
			undo = append(undo, m)
		}
		if !p.Force {
			for _, m := range undo {
				if err := checkDrops(ctx, pool, m, false); err != nil {
					return err
				}
			}
		}
		for _, m := range undo {
			if err := a.undo(ctx, m, p.Force); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			done = append(done, m)
		}
		return nil
	})
	if err != nil {
		return done, fmt.Errorf("migrate down %s: %w", p.Config, err)
	}
	return done, nil
}

// undo runs m's down SQL and deletes its tracking row: in one transaction,
// or, for a non-transactional migration, statement by statement and then
// the row. Without force, it first locks each queue table the down drops
// and refuses if it holds a job.
func (a applier) undo(ctx context.Context, m Migration, force bool) error {
	del := "DELETE FROM " + a.table + " WHERE config = $1 AND version = $2"
	if noTransaction(m.Down) {
		for _, stmt := range statements(m.Down) {
			if err := a.execAlone(ctx, stmt); err != nil {
				return err
			}
		}
		_, err := a.pool.Exec(ctx, del, a.config, m.Version)
		return err
	}
	return pgx.BeginTxFunc(ctx, a.pool, lockTx, func(tx pgx.Tx) error {
		if !force {
			if err := checkDrops(ctx, tx, m, true); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, m.Down); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, del, a.config, m.Version)
		return err
	})
}

// dropTable matches the statements of a down migration that drop a table,
// capturing its schema and name (quoted as the generator quotes them).
var dropTable = regexp.MustCompile(`(?m)^DROP TABLE (?:IF EXISTS )?("(?:[^"]|"")+")\.("(?:[^"]|"")+")`)

// droppedQueueTables returns the quoted, schema-qualified queue tables
// that down drops: skipjack's own tables start with an underscore, queue
// tables never do.
func droppedQueueTables(down string) []string {
	var out []string
	for _, m := range dropTable.FindAllStringSubmatch(down, -1) {
		if !strings.HasPrefix(m[2], `"_`) {
			out = append(out, m[1]+"."+m[2])
		}
	}
	return out
}

// dropChecker is what checkDrops runs on: the pool, or a transaction.
type dropChecker interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// checkDrops returns an error matching ErrTableHoldsJobs when m's down
// SQL drops a queue table that holds a job. With lock, it first locks each
// such table as the drop will (q must then be a transaction), so that no
// job is enqueued between the check and the drop.
func checkDrops(ctx context.Context, q dropChecker, m Migration, lock bool) error {
	for _, t := range droppedQueueTables(m.Down) {
		var exists bool
		if err := q.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", t).Scan(&exists); err != nil {
			return fmt.Errorf("look for table %s: %w", t, err)
		}
		if !exists {
			continue
		}
		if lock {
			if _, err := q.Exec(ctx, "LOCK TABLE "+t+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				return fmt.Errorf("lock table %s: %w", t, err)
			}
		}
		var n int64
		// Counted up to a bound: the message says how many, and a table of
		// millions is not scanned to say it.
		if err := q.QueryRow(ctx, "SELECT count(*) FROM (SELECT FROM "+t+" LIMIT 10001) s").Scan(&n); err != nil {
			return fmt.Errorf("count jobs in %s: %w", t, err)
		}
		if n > 0 {
			jobs := fmt.Sprintf("%d jobs", n)
			switch {
			case n == 1:
				jobs = "1 job"
			case n > 10000:
				jobs = "more than 10000 jobs"
			}
			return fmt.Errorf("%s %w (%s holds %s); pass --force to drop them", m.Name, ErrTableHoldsJobs, unquote(t), jobs)
		}
	}
	return nil
}

// unquote shows a quoted, schema-qualified name as users write it.
func unquote(t string) string { return strings.ReplaceAll(t, `"`, "") }
