package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
)

// migrateCommands are skipjack migrate status|down: what the tracking
// table says, and undoing the last migrations with their generated down
// SQL. Like migrate, they need the YAML, the migrations folder and the
// database, and no Go toolchain.
var migrateCommands = []command{
	{
		name: "migrate status", synopsis: "[-f skipjack.yaml] [--database-url URL]",
		summary: "list the migrations applied (with when) and pending", database: true,
		run: migrateStatus,
	},
	{
		name: "migrate down", synopsis: "[N] [--force] [-f skipjack.yaml] [--database-url URL]",
		summary:  "undo the last N applied migrations (default 1), newest first, with their\n             down SQL; refuses to drop a queue table holding jobs unless --force",
		database: true,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.force, "force", false, "also undo migrations that drop a queue table holding jobs (the jobs are lost)")
		},
		args: downSteps, run: migrateDown,
	},
}

// downSteps parses the optional N of migrate down.
func downSteps(o *options, args []string) error {
	o.steps = 1
	switch {
	case len(args) > 1:
		return fmt.Errorf("unexpected arguments %q", args[1:])
	case len(args) == 1:
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return fmt.Errorf("the number of migrations to undo is %q, want 1 or more", args[0])
		}
		o.steps = n
	}
	return nil
}

// migrationParams loads the config and its migrations folder, with each
// migration's down SQL.
func migrationParams(file string) (*config.Config, skipjackimpl.MigrateParams, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, skipjackimpl.MigrateParams{}, err
	}
	ms, _, err := generator.Migrations(cfg)
	if err != nil {
		return nil, skipjackimpl.MigrateParams{}, err
	}
	p := skipjackimpl.MigrateParams{Config: cfg.Name, Schema: cfg.Schema}
	for _, m := range ms {
		p.Migrations = append(p.Migrations, skipjackimpl.Migration(m))
	}
	return cfg, p, nil
}

// migrateStatus prints every migration of the folder and of the tracking
// table: applied ones with when, pending ones, and applied ones whose file
// is missing.
func migrateStatus(o options, e env) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, p, err := migrationParams(o.file)
	if err != nil {
		return err
	}
	pool, err := migratePool(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rep, err := skipjackimpl.Status(ctx, pool, p)
	if err != nil {
		return err
	}
	printStatus(e.stdout, cfg, rep)
	return nil
}

// printStatus writes the status report of cfg's migrations.
func printStatus(w io.Writer, cfg *config.Config, rep skipjackimpl.StatusReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tMIGRATION\tAPPLIED AT")
	var applied, pending, missing int
	for _, m := range rep.Migrations {
		at := "pending"
		switch {
		case m.AppliedAt != nil:
			applied++
			at = m.AppliedAt.UTC().Format(time.RFC3339)
			if m.Missing {
				missing++
				at += " (file missing from the migrations folder)"
			}
		default:
			pending++
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, m.Name, at)
	}
	tw.Flush()
	fmt.Fprintf(w, "skipjack migrate status: %s (schema %s): %d applied, %d pending", cfg.Name, cfg.Schema, applied, pending)
	if missing > 0 {
		fmt.Fprintf(w, ", %d applied but not in %s", missing, cfg.Migrations.Dir)
	}
	fmt.Fprintln(w)
	if rep.Busy {
		fmt.Fprintln(w, "skipjack migrate status: a migrate or migrate down is running now (it holds the migration lock); run status again when it is done")
	}
}

// migrateDown undoes the last o.steps applied migrations.
func migrateDown(o options, e env) error {
	start := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, p, err := migrationParams(o.file)
	if err != nil {
		return err
	}
	pool, err := migratePool(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	undone, err := skipjackimpl.Rollback(ctx, pool, skipjackimpl.RollbackParams{MigrateParams: p, Steps: o.steps, Force: o.force})
	// What was undone comes first, also when a later one failed.
	for _, m := range undone {
		fmt.Fprintf(e.stdout, "skipjack migrate down: undid %s\n", m.Name)
	}
	if errors.Is(err, skipjackimpl.ErrTableHoldsJobs) && len(undone) == 0 {
		return fmt.Errorf("%w; nothing was undone", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "skipjack migrate down: %s undone in %s (schema %s) in %v\n",
		plural(len(undone), "migration"), cfg.Name, cfg.Schema, time.Since(start).Round(time.Millisecond))
	if cfg.Migrations.Format != "plain" {
		fmt.Fprintf(e.stdout, "skipjack migrate down: undone in skipjack's own tracking (%s.%s), not %s's\n", cfg.Schema, "_skipjack_migrations", cfg.Migrations.Format)
	}
	return nil
}

// migrateSubcommand reports whether args (after "migrate") start with one
// of migrate's subcommands.
func migrateSubcommand(args []string) bool {
	return len(args) > 0 && (args[0] == "status" || args[0] == "down")
}
