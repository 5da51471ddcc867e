package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// admin creates and drops the benchmark's databases through a connection to
// the server's maintenance database.
type admin struct {
	base *url.URL
	conn *pgx.Conn
	seq  int
}

func newAdmin(ctx context.Context, databaseURL string) (*admin, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", u.Redacted(), err)
	}
	return &admin{base: u, conn: conn}, nil
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
	name := fmt.Sprintf("skjbench_%s_%s_%d_%d", strings.ReplaceAll(system, "-", "_"), phase, pid, a.seq)
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
