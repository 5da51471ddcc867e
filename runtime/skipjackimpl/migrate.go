package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
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
	// Down is the SQL that undoes it, for Rollback; the generated packages
	// leave it empty (they only apply).
	Down string
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
// yet, in version order, and records each in
// "<Schema>"."_skipjack_migrations"; see Apply.
func Migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) error {
	_, err := Apply(ctx, pool, p)
	return err
}

// NoTransactionMarker starts a line of a migration whose statements must
// run outside a transaction (CREATE or DROP INDEX CONCURRENTLY); the
// generator writes it.
const NoTransactionMarker = "-- skipjack:no-transaction"

// Lock timeouts are retried this many times in all, the first retry after
// lockRetryDelay and each later one after twice the delay before: a
// migration that sets lock_timeout gives way to a transaction holding its
// table, and usually gets through a moment later.
const (
	lockAttempts   = 5
	lockRetryDelay = 200 * time.Millisecond
)

// Apply applies the migrations of p that the database has not recorded
// yet, in version order, and returns those it applied.
//
// A migration is applied in one transaction together with its tracking row
// in "<Schema>"."_skipjack_migrations", unless it holds NoTransactionMarker:
// then each of its statements runs on its own, outside any transaction,
// and its row is written once they all succeeded. Before a statement that
// builds an index CONCURRENTLY, an invalid index of that name (what a
// failed concurrent build leaves) is dropped; when the build fails, the
// invalid index it left is dropped too. So a migration that failed part way
// can simply be applied again. A migration that fails on a lock timeout
// (SQLSTATE 55P03) is retried a few times with backoff.
//
// Many processes may call it at once: each migration first takes a
// transaction-scoped advisory lock keyed by a hash of "skipjack:"+Config,
// in a read committed transaction whatever the database's default, and
// then checks, under that lock, that the migration is still unrecorded, so
// exactly one caller applies it and the others wait and skip it. A caller
// waits for the lock between statements, never inside one: it asks with
// pg_try_advisory_xact_lock in a transaction of its own, ends that
// transaction when the lock is taken, and asks again after a pause that
// grows from 5ms to 250ms. A statement waiting for the lock would hold a
// snapshot, which a concurrent index build of the holder waits for, and
// the two would wait for each other forever. The statements of a
// non-transactional migration run on a second connection while the first
// holds the lock, so the pool needs two connections.
// Nothing outlives a transaction (no session lock, no prepared statement,
// no SET), so Apply works through a pooler in transaction mode, such as
// PgBouncer with pool_mode = transaction, as well as on a direct
// connection.
func Apply(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) ([]Migration, error) {
	return migrate(ctx, pool, p)
}

// lockTx are the options of every transaction that takes a migration
// lock. Read committed whatever the database's default: under repeatable
// read the snapshot is taken by the first statement, the attempt at the
// lock itself, before the lock is granted, so a caller whose attempt came
// as the holder committed would not see the migration the holder recorded
// and would apply it a second time.
var lockTx = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// lockKey returns the advisory lock key of name.
func lockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}

func migrate(ctx context.Context, pool *pgxpool.Pool, p MigrateParams) ([]Migration, error) {
	if p.Config == "" || p.Schema == "" {
		return nil, fmt.Errorf("migrate: MigrateParams needs Config and Schema")
	}
	ms := slices.Clone(p.Migrations)
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrate %s: migrations %s and %s share version %d", p.Config, ms[i-1].Name, ms[i].Name, ms[i].Version)
		}
	}

	table := pgx.Identifier{p.Schema, "_skipjack_migrations"}.Sanitize()
	if err := ensureTrackingTable(ctx, pool, p.Schema, table); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", p.Config, err)
	}
	var done []Migration
	// A rollback that ran between two of this run's migrations (each
	// holds the lock on its own) undid what the run read as applied: the
	// run then starts over from what is applied now.
	for restarts := 0; ; restarts++ {
		more, err := applyPending(ctx, pool, p, ms, table)
		done = append(done, more...)
		if !errors.Is(err, errRolledBack) || restarts == 10 {
			return done, err
		}
	}
}

// errRolledBack says that the migration before the one to apply is no
// longer recorded: a rollback undid it since the run read what was
// applied.
var errRolledBack = errors.New("an earlier migration was rolled back meanwhile")

// applyPending applies the migrations of ms (sorted) not yet recorded in
// table, and returns those it applied.
func applyPending(ctx context.Context, pool *pgxpool.Pool, p MigrateParams, ms []Migration, table string) ([]Migration, error) {
	// Reading what is applied without the lock only saves transactions:
	// each migration is checked again under the lock before it is applied.
	rows, err := pool.Query(ctx, "SELECT version FROM "+table+" WHERE config = $1", p.Config)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("migrate %s: read applied migrations: %w", p.Config, err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}

	for _, m := range ms {
		if !applied[m.Version] && noTransaction(m.Up) && pool.Config().MaxConns < 2 {
			return nil, fmt.Errorf("migrate %s: %s runs outside a transaction beside the lock's, so the pool needs at least 2 connections (MaxConns is %d)",
				p.Config, m.Name, pool.Config().MaxConns)
		}
	}
	a := applier{pool: pool, table: table, config: p.Config, key: lockKey("skipjack:" + p.Config)}
	var done []Migration
	for i, m := range ms {
		if applied[m.Version] {
			continue
		}
		prev := 0 // the migration that must be recorded before m: the one before it
		if i > 0 {
			prev = ms[i-1].Version
		}
		var ran bool
		delay := lockRetryDelay
		for attempt := 1; ; attempt++ {
			ran, err = a.apply(ctx, m, prev)
			if err == nil || attempt == lockAttempts || sqlState(err) != "55P03" { // lock_not_available
				break
			}
			select {
			case <-ctx.Done():
				return done, fmt.Errorf("migrate %s: %s: %w", p.Config, m.Name, err)
			case <-time.After(delay):
			}
			delay *= 2
		}
		if errors.Is(err, errRolledBack) {
			return done, err
		}
		if err != nil {
			return done, fmt.Errorf("migrate %s: %s: %w", p.Config, m.Name, err)
		}
		if ran {
			done = append(done, m)
		}
	}
	return done, nil
}

// applier applies the migrations of one config.
type applier struct {
	pool   *pgxpool.Pool
	table  string // the quoted tracking table
	config string
	key    int64 // the config's advisory lock
}

// apply applies m unless another caller recorded it first, and reports
// whether it did. It returns errRolledBack when prev (0 for none), the
// migration before m, is not recorded any more.
func (a applier) apply(ctx context.Context, m Migration, prev int) (ran bool, err error) {
	err = withLock(ctx, a.pool, a.key, func(tx pgx.Tx) error {
		// The simple protocol leaves no portal open, and so no snapshot
		// held, after the check: the extended protocol's unnamed portal
		// would keep the check's snapshot until the next statement, and a
		// concurrent index build waits for every older snapshot.
		var done, prevDone bool
		err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+a.table+" WHERE config = $1 AND version = $2), "+
			"$3 = 0 OR EXISTS (SELECT FROM "+a.table+" WHERE config = $1 AND version = $3)",
			pgx.QueryExecModeSimpleProtocol, a.config, m.Version, prev).Scan(&done, &prevDone)
		switch {
		case err != nil || done:
			return err // another caller applied it while this one waited
		case !prevDone:
			return errRolledBack
		}
		if noTransaction(m.Up) {
			// The lock transaction now holds no snapshot (read committed,
			// between statements) and no lock on a queue table, so the
			// concurrent builds on the other connection do not wait for it.
			for _, stmt := range statements(m.Up) {
				if err := a.execAlone(ctx, stmt); err != nil {
					return err
				}
			}
		} else if _, err := tx.Exec(ctx, m.Up); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "INSERT INTO "+a.table+" (config, version, name) VALUES ($1, $2, $3)", a.config, m.Version, m.Name)
		ran = err == nil
		return err
	})
	return ran, err
}

// The first retry of a taken migration lock comes after lockPollMin, each
// later one after twice the wait before, up to lockPollMax: a migration
// that holds the lock briefly is followed at once, and a long concurrent
// build is asked about four times a second.
const (
	lockPollMin = 5 * time.Millisecond
	lockPollMax = 250 * time.Millisecond
)

// errLockTaken rolls back a transaction whose attempt at the lock failed.
var errLockTaken = errors.New("lock taken")

// withLock runs fn in a read committed transaction that holds the
// transaction-scoped advisory lock key, and commits it when fn returns nil.
//
// It never waits for the lock inside a statement: a statement that waits
// holds a snapshot, and the last phase of a concurrent index build waits
// for every transaction with a snapshot older than its own, so a waiter
// and a holder building an index would wait for each other forever. Each
// attempt is a transaction of its own that asks with
// pg_try_advisory_xact_lock (in the simple protocol, which leaves no
// portal and so no snapshot behind) and, when the lock is taken, ends
// before the next attempt: a build that began waiting for the attempt's
// snapshot waits only until that transaction ends. Attempts back off from
// lockPollMin to lockPollMax and stop when ctx ends.
func withLock(ctx context.Context, pool *pgxpool.Pool, key int64, fn func(pgx.Tx) error) error {
	wait := lockPollMin
	for {
		err := pgx.BeginTxFunc(ctx, pool, lockTx, func(tx pgx.Tx) error {
			var got bool
			if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", pgx.QueryExecModeSimpleProtocol, key).Scan(&got); err != nil {
				return fmt.Errorf("advisory lock: %w", err)
			}
			if !got {
				return errLockTaken
			}
			return fn(tx)
		})
		if !errors.Is(err, errLockTaken) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("advisory lock: %w", context.Cause(ctx))
		case <-t.C:
		}
		wait = min(2*wait, lockPollMax)
	}
}

var concurrentIndex = regexp.MustCompile(`^CREATE (?:UNIQUE )?INDEX CONCURRENTLY IF NOT EXISTS ("(?:[^"]|"")+") ON ("(?:[^"]|"")+")\.`)

// execAlone runs one statement outside any transaction. An index that it
// builds concurrently and that a failed earlier build left invalid is
// dropped first, and so is the invalid index its own failed build leaves.
func (a applier) execAlone(ctx context.Context, stmt string) error {
	m := concurrentIndex.FindStringSubmatch(stmt)
	if m == nil {
		_, err := a.pool.Exec(ctx, stmt)
		return err
	}
	index := m[2] + "." + m[1]
	if err := a.dropInvalid(ctx, index); err != nil {
		return err
	}
	if _, err := a.pool.Exec(ctx, stmt); err != nil {
		if dropErr := a.dropInvalid(context.WithoutCancel(ctx), index); dropErr != nil {
			return fmt.Errorf("%w (and dropping the invalid index it left: %v)", err, dropErr)
		}
		return err
	}
	return nil
}

// dropInvalid drops index (schema-qualified and quoted) if it exists and is
// invalid.
func (a applier) dropInvalid(ctx context.Context, index string) error {
	var invalid bool
	err := a.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_index WHERE indexrelid = to_regclass($1) AND NOT indisvalid)", index).Scan(&invalid)
	if err != nil {
		return fmt.Errorf("look for invalid index %s: %w", index, err)
	}
	if !invalid {
		return nil
	}
	if _, err := a.pool.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+index); err != nil {
		return fmt.Errorf("drop invalid index %s: %w", index, err)
	}
	return nil
}

// noTransaction reports whether sql holds NoTransactionMarker at the start
// of a line.
func noTransaction(sql string) bool {
	for line := range strings.Lines(sql) {
		if strings.HasPrefix(line, NoTransactionMarker) {
			return true
		}
	}
	return false
}

// statements splits the SQL of a non-transactional migration into its
// statements: comment lines dropped, a statement ending with the line that
// ends with a semicolon. Generated non-transactional migrations hold only
// index statements, which have no semicolon inside.
func statements(sql string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(sql) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if cur.Len() > 0 {
			cur.WriteByte('\n')
		}
		cur.WriteString(line)
		if strings.HasSuffix(line, ";") {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// ensureTrackingTable creates the schema and the tracking table if they
// are missing. Configs sharing a schema hold different config locks, so
// the creation is serialized by a transaction-scoped lock on the schema.
func ensureTrackingTable(ctx context.Context, pool *pgxpool.Pool, schema, table string) error {
	err := withLock(ctx, pool, lockKey("skipjack:schema:"+schema), func(tx pgx.Tx) error {
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
