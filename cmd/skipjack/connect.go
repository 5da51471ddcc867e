package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// connectTimeout bounds connecting when the URL sets no connect_timeout,
// so a wrong host fails in seconds instead of the operating system's
// minutes.
const connectTimeout = 10 * time.Second

// connect opens a pool on dbURL for stats, jobs and ui and checks that it
// reaches the database.
//
// Unless the URL chooses a default_query_exec_mode itself, the pool uses
// pgx's exec mode: every statement is one Parse/Bind/Execute/Sync on the
// unnamed statement, so it works through PgBouncer's transaction pooling,
// where pgx's default (named statements cached per connection) fails on
// the second run with `prepared statement "stmtcache_..." already exists`
// (SQLSTATE 42P05). The CLI runs a handful of statements per call, so the
// statement cache would save nothing anyway.
func connect(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if !strings.Contains(dbURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "skipjack" // in pg_stat_activity
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err // pgconn's error names the host, user and database
	}
	return pool, nil
}

// explainPooler adds what to do to the errors that a statement cache
// produces behind PgBouncer's transaction pooling: a URL whose
// default_query_exec_mode prepares named statements.
func explainPooler(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P05" || pe.Code == "26000") {
		return fmt.Errorf("%w\n(behind PgBouncer's transaction pooling, named prepared statements land on other clients' connections: drop default_query_exec_mode from the URL, or set it to exec or simple_protocol)", err)
	}
	return err
}

// queueAdmins returns the admin of each live queue of cfg on db, in YAML
// order. It needs only the config: no Go module, no generated code.
func queueAdmins(cfg *config.Config, db tableadmin.DBTX) ([]*tableadmin.Admin, error) {
	qs, err := generator.QueueSQLs(cfg)
	if err != nil {
		return nil, err
	}
	admins := make([]*tableadmin.Admin, 0, len(qs))
	for _, q := range qs {
		a, err := tableadmin.New(q, db)
		if err != nil {
			return nil, err
		}
		admins = append(admins, a)
	}
	return admins, nil
}

// withQueues loads o's config, connects to o's database and calls f with
// the admins of the config's live queues. A bad config, or an o.queue that
// is not a live queue of it, is reported before connecting.
func withQueues(o options, f func(ctx context.Context, cfg *config.Config, admins []*tableadmin.Admin) error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(o.file)
	if err != nil {
		return err
	}
	if err := knownQueue(cfg, o.queue); err != nil {
		return err
	}
	pool, err := connect(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	admins, err := queueAdmins(cfg, pool)
	if err != nil {
		return err
	}
	return explainPooler(f(ctx, cfg, admins))
}

// withQueue is withQueues for the one queue o.queue names: it calls f with
// that queue's admin and prefixes f's error with the queue's name.
func withQueue(o options, f func(ctx context.Context, q *tableadmin.Admin) error) error {
	return withQueues(o, func(ctx context.Context, _ *config.Config, admins []*tableadmin.Admin) error {
		for _, q := range admins {
			if q.Name() == o.queue {
				if err := f(ctx, q); err != nil {
					return fmt.Errorf("%s: %w", q.Name(), err)
				}
				return nil
			}
		}
		return fmt.Errorf("unknown queue %q", o.queue) // knownQueue let it through
	})
}

// knownQueue checks that name ("" for none) is a live queue of cfg.
func knownQueue(cfg *config.Config, name string) error {
	if name == "" {
		return nil
	}
	var names []string
	for _, q := range cfg.LiveQueues() {
		if q.Name == name {
			return nil
		}
		names = append(names, q.Name)
	}
	for _, q := range cfg.Queues {
		if q.Name == name && q.Dropped {
			return fmt.Errorf("queue %q is dropped in %s", name, cfg.Path)
		}
	}
	return fmt.Errorf("unknown queue %q; %s declares %s", name, cfg.Path, strings.Join(names, ", "))
}
