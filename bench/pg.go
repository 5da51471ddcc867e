package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// admin creates and drops the benchmark's databases through a connection to
// the server's maintenance database.
type admin struct {
	base *url.URL
	conn *pgx.Conn
	seq  int
	// prefix starts every database name: $SKIPJACK_TEST_PREFIX, as for
	// the tests (skipjacktest.Prefix), then "bench_".
	prefix string
}

func newAdmin(ctx context.Context, databaseURL string) (*admin, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	prefix, err := skipjacktest.Prefix()
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", u.Redacted(), err)
	}
	return &admin{base: u, conn: conn, prefix: prefix + "bench_"}, nil
}

func (a *admin) close(ctx context.Context) { _ = a.conn.Close(ctx) }

// dsn returns the URL of database name on the same server.
func (a *admin) dsn(name string) string {
	u := *a.base
	u.Path = "/" + name
	return u.String()
}

// freshDB creates a new, empty database for one system and phase and returns
// its name and URL. Names carry the process id so that concurrent benchmark
// processes on one server do not collide.
func (a *admin) freshDB(ctx context.Context, system, phase string) (string, string, error) {
	a.seq++
	name := fmt.Sprintf("%s%s_%s_%d_%d", a.prefix, strings.ReplaceAll(system, "-", "_"), phase, pid, a.seq)
	if _, err := a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return "", "", fmt.Errorf("drop database %s: %w", name, err)
	}
	if _, err := a.conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, a.dsn(name), nil
}

func (a *admin) dropDB(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := a.conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// settings reads the server settings that matter for a queue benchmark.
func (a *admin) settings(ctx context.Context) ([][2]string, error) {
	names := []string{
		"server_version", "shared_buffers", "synchronous_commit", "fsync", "wal_level",
		"max_wal_size", "checkpoint_timeout", "work_mem", "max_connections", "autovacuum",
		"autovacuum_naptime", "jit", "random_page_cost", "effective_cache_size",
	}
	out := make([][2]string, 0, len(names))
	for _, n := range names {
		var v string
		if err := a.conn.QueryRow(ctx, "SHOW "+n).Scan(&v); err != nil {
			return nil, fmt.Errorf("show %s: %w", n, err)
		}
		out = append(out, [2]string{n, v})
	}
	return out, nil
}

// openPool connects a pool to dsn. maxConns 0 keeps pgxpool's default
// (max(4, GOMAXPROCS)), which is what River's own benchmark runs with.
func openPool(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse pool config: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "skipjack-bench"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping: %w", err)
	}
	return pool, nil
}

// backend is one server process connected to a database.
type backend struct {
	pid   int
	query string // its current or last statement
}

// backends returns the client backends connected to database db.
func (a *admin) backends(ctx context.Context, db string) ([]backend, error) {
	rows, err := a.conn.Query(ctx, `SELECT pid, coalesce(query, '') FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend'`, db)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend, error) {
		var b backend
		err := r.Scan(&b.pid, &b.query)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	return bs, nil
}

// dbStats returns the transactions (committed and rolled back) and the
// rows returned by scans of database db so far.
func (a *admin) dbStats(ctx context.Context, db string) (xacts, tupReturned int64, err error) {
	err = a.conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_returned FROM pg_stat_database WHERE datname = $1`, db).
		Scan(&xacts, &tupReturned)
	if err != nil {
		return 0, 0, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return xacts, tupReturned, nil
}

// checkFreeConns fails when the server has fewer than need connection
// slots free for ordinary roles, so that an experiment does not take the
// last connections of a server that others share.
func (a *admin) checkFreeConns(ctx context.Context, need int) error {
	var free int
	err := a.conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&free)
	if err != nil {
		return fmt.Errorf("count free connections: %w", err)
	}
	if free < need {
		return fmt.Errorf("needs about %d free connections, the server has %d: run it on a throwaway cluster with more, e.g. PG_OPTS='-c max_connections=300' ./autovacuum.sh -no-main -idle 50", need, free)
	}
	return nil
}
