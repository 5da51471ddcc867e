package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// env is what a command may touch.
type env struct {
	stdout, stderr io.Writer
	sqlc           func(dir string) error
}

// defaultFile is the config file -f names when not given.
const defaultFile = "skipjack.yaml"

// options are the parsed flags and arguments of one command.
type options struct {
	file    string
	dbURL   string
	asJSON  bool
	listen  string // ui
	actions bool   // ui
	// allowedHosts: ui answers these Hosts besides IP addresses and
	// localhost (--allowed-host).
	allowedHosts hostList
	// allowBreaking: generate and check accept payload changes that
	// break queued jobs, printing them.
	allowBreaking bool
	// contract: generate plans the contract steps of changes rolled out
	// in two steps.
	contract bool
	// migrate down: how many migrations to undo, and --force.
	steps int
	force bool
	// jobs: the queue, job ids, --state, --after and --limit.
	queue string
	ids   []int64
	state string
	after int64
	limit int
	// workflow: workflows list --name.
	workflow string
	// bench: the sizes of skipjack bench.
	bench benchOptions
}

// A command is one subcommand of the CLI with the flags it accepts.
type command struct {
	name     string
	synopsis string // the flags and arguments after the command's name
	summary  string
	// database: the command takes --database-url (default $DATABASE_URL)
	// and needs a database; json: it takes --json; noConfig: it reads no
	// skipjack.yaml, so it takes no -f.
	database, json, noConfig bool
	// flags adds the command's own flags, or is nil.
	flags func(fs *flag.FlagSet, o *options)
	// args parses the command's positional arguments into o (a returned
	// error is a usage error); nil means the command takes none.
	args func(o *options, args []string) error
	run  func(o options, e env) error
}

// commands are every command, in the order usage lists them.
var commands = append([]command{
	{
		name: "generate", synopsis: "[-f skipjack.yaml] [--allow-breaking] [--contract]",
		summary: "write the migrations, sqlc code and queue packages the YAML declares",
		flags:   generateFlags,
		run:     func(o options, e env) error { return generate(o.file, o.allowBreaking, o.contract, e) },
	},
	{
		name: "check", synopsis: "[-f skipjack.yaml] [--allow-breaking]",
		summary: "write nothing; list every generated file that is changed, missing or\n             stale and every migration the YAML needs, and exit 1 if there are any",
		flags:   breakingFlags,
		run:     func(o options, e env) error { return check(o.file, o.allowBreaking, e) },
	},
	{
		name: "migrate", synopsis: "[-f skipjack.yaml] [--database-url URL]",
		summary: "apply pending migrations to a database", database: true,
		run: migrate,
	},
	{
		name: "stats", synopsis: "[-f skipjack.yaml] [--database-url URL] [--json]",
		summary: "print per-queue job counts", database: true, json: true,
		run: stats,
	},
	{
		name: "schema", synopsis: "",
		summary:  "print the JSON Schema of skipjack.yaml, for editors and linters",
		noConfig: true,
		run: func(_ options, e env) error {
			_, err := e.stdout.Write(config.JSONSchema())
			return err
		},
	},
	{
		name: "version", synopsis: "",
		summary:  "print the version of skipjack: the module version it was built at",
		noConfig: true,
		run: func(_ options, e env) error {
			_, err := fmt.Fprintln(e.stdout, version())
			return err
		},
	},
	{
		name: "ui", synopsis: "[-f skipjack.yaml] [--database-url URL] [--listen ADDR] [--allowed-host HOST]... [--actions]",
		summary: "serve the web dashboard over the queues", database: true,
		flags: uiFlags, run: ui,
	},
	{
		name: "bench", synopsis: "[--database-url URL] [--jobs N] [--latency-jobs N] [--concurrency N]",
		summary:  "run a burn-down and a latency run of a throwaway queue on a database\n             (jobs/s, pickup p50/p99); drops the queue's schema at the end",
		database: true, noConfig: true, flags: benchFlags, run: bench,
	},
}, append(append(append(jobsCommands, workflowsCommands...), queuesCommands...), migrateCommands...)...)

// usage is the CLI's overall usage.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: skipjack <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-14s %s\n", c.name, strings.ReplaceAll(c.summary, "\n             ", "\n                 "))
	}
	b.WriteString("\nrun skipjack <command> -h for the flags of a command\n")
	return b.String()
}

// flagSet returns the flags of c, bound to o, printing c's usage to w on a
// flag error.
func (c *command) flagSet(o *options, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("skipjack "+c.name, flag.ContinueOnError)
	fs.SetOutput(w)
	if !c.noConfig {
		fs.StringVar(&o.file, "f", defaultFile, "the config `FILE` (default ./skipjack.yaml)")
	}
	if c.database {
		fs.StringVar(&o.dbURL, "database-url", os.Getenv("DATABASE_URL"), "the database `URL` (default $DATABASE_URL)")
	}
	if c.json {
		fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	}
	if c.flags != nil {
		c.flags(fs, o)
	}
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: %s\n\n%s\n", strings.TrimSpace("skipjack "+c.name+" "+c.synopsis), strings.Join(strings.Fields(c.summary), " "))
		if c.noConfig && !c.database && !c.json && c.flags == nil {
			return
		}
		fmt.Fprint(w, "\nflags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, help := flag.UnquoteUsage(f)
			dash := "-"
			if len(f.Name) > 1 {
				dash = "--"
			}
			fmt.Fprintf(w, "  %s\n", strings.TrimSpace(dash+f.Name+" "+name))
			fmt.Fprintf(w, "\t%s\n", help)
		})
	}
	return fs
}

// run executes the command line args and returns the exit status.
func run(args []string, e env) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, usage())
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	name, rest := args[0], args[1:]
	if (name == "jobs" || name == "workflows" || name == "queues") && len(rest) > 0 { // jobs list|show|retry|cancel, workflows list|show, queues pause|resume
		name, rest = name+" "+rest[0], rest[1:]
	}
	if name == "migrate" && migrateSubcommand(rest) { // migrate status|down; plain migrate applies
		name, rest = name+" "+rest[0], rest[1:]
	}
	var c *command
	for i := range commands {
		if commands[i].name == name {
			c = &commands[i]
		}
	}
	if c == nil && name == "jobs" {
		fmt.Fprintf(e.stderr, "skipjack jobs: missing subcommand: list, show, retry or cancel\n\n%s", usage())
		return exitUsage
	}
	if c == nil && name == "workflows" {
		fmt.Fprintf(e.stderr, "skipjack workflows: missing subcommand: list or show\n\n%s", usage())
		return exitUsage
	}
	if c == nil && name == "queues" {
		fmt.Fprintf(e.stderr, "skipjack queues: missing subcommand: pause or resume\n\n%s", usage())
		return exitUsage
	}
	if c == nil {
		names := make([]string, len(commands))
		for i, c := range commands {
			names[i] = c.name
		}
		fmt.Fprintf(e.stderr, "skipjack: unknown command %q%s\n\n%s", name, config.DidYouMean(name, names), usage())
		return exitUsage
	}
	o, fs, err := c.parse(rest, e.stderr)
	var bad argsError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &bad):
		fmt.Fprintf(e.stderr, "skipjack %s: %v\n\n", c.name, err)
		fs.Usage()
		return exitUsage
	case err != nil: // the flag package printed it and the usage
		return exitUsage
	}
	if c.database && o.dbURL == "" {
		fmt.Fprintf(e.stderr, "skipjack %s: no database: pass --database-url or set DATABASE_URL\n\n", c.name)
		fs.Usage()
		return exitUsage
	}
	if err := c.run(o, e); err != nil {
		var ce config.Errors
		switch {
		case errors.As(err, &ce):
			for _, x := range ce {
				fmt.Fprintln(e.stderr, x.Error())
			}
		case errors.Is(err, errReported):
		default:
			fmt.Fprintf(e.stderr, "skipjack %s: %v\n", c.name, err)
		}
		return exitFailure
	}
	return exitOK
}

// argsError is a usage error in a command's positional arguments.
type argsError struct{ err error }

func (e argsError) Error() string { return e.err.Error() }

// parse parses the flags and positional arguments of c. A flag error has
// been printed with c's usage to stderr already; a positional argument
// error is an argsError, for the caller to print.
func (c *command) parse(args []string, stderr io.Writer) (options, *flag.FlagSet, error) {
	var o options
	fs := c.flagSet(&o, stderr)
	positional, err := parseInterspersed(fs, args)
	switch {
	case err != nil:
	case c.args != nil:
		if err = c.args(&o, positional); err != nil {
			err = argsError{err}
		}
	case len(positional) > 0:
		err = argsError{fmt.Errorf("unexpected arguments %q", positional)}
	}
	return o, fs, err
}

// parseInterspersed parses flags that may come before, between and after
// positional arguments (skipjack jobs show send_email 12 --json) and
// returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// errReported is returned by a command that has already printed why it
// failed (check's drift report, a failed program's own output).
var errReported = errors.New("failure already reported")

// breakingFlags adds --allow-breaking (generate, check).
func breakingFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.allowBreaking, "allow-breaking", false, "accept payload changes that break jobs already queued, listing them")
}

// generateFlags adds --allow-breaking and --contract (generate).
func generateFlags(fs *flag.FlagSet, o *options) {
	breakingFlags(fs, o)
	fs.BoolVar(&o.contract, "contract", false, "also generate the contract steps of changes rolled out in two steps (run once no process of the release before them runs)")
}

// loadAllowing is load that, with allowBreaking, generates despite payload
// changes that break jobs already queued, and prints each one it allowed.
func loadAllowing(file string, allowBreaking, contract bool, e env) (*config.Config, *generator.Output, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, nil, err
	}
	out, err := generator.Generate(cfg, generator.Options{SQLC: e.sqlc, AllowBreaking: allowBreaking, Contract: contract})
	if err != nil {
		return nil, nil, err
	}
	for _, x := range out.AllowedBreaking {
		fmt.Fprintln(e.stderr, x.Error())
	}
	return cfg, out, nil
}

func generate(file string, allowBreaking, contract bool, e env) error {
	start := time.Now()
	cfg, out, err := loadAllowing(file, allowBreaking, contract, e)
	if err != nil {
		return err
	}
	touched, err := generator.Write(cfg.Dir, out)
	for _, p := range touched {
		fmt.Fprintf(e.stdout, "wrote %s\n", displayPath(cfg, p))
	}
	if err != nil {
		return err
	}
	if err := requireRuntime(cfg.Dir); err != nil {
		// The files are written; they just do not build yet.
		fmt.Fprintf(e.stderr, "skipjack generate: note: %v\n", err)
	}
	for _, x := range out.Rollout {
		fmt.Fprintln(e.stdout, x.Error())
	}
	fmt.Fprintf(e.stdout, "skipjack: %s, %s: %s in %v\n",
		plural(len(cfg.LiveQueues()), "queue"), plural(len(out.Files), "generated file"), changes(out, touched), time.Since(start).Round(time.Millisecond))
	return nil
}

// changes says what generate's Write did: "all up to date", or how many
// generated files it wrote, how many new migrations and how many stale
// files it deleted ("wrote 17, 2 new migrations").
func changes(out *generator.Output, touched []string) string {
	kind := map[string]string{}
	for _, f := range out.Files {
		kind[f.Path] = "generated"
	}
	for _, f := range out.NewMigrations {
		kind[f.Path] = "migration"
	}
	var wrote, migrations, deleted int
	for _, p := range touched {
		switch kind[p] {
		case "generated":
			wrote++
		case "migration":
			migrations++
		default:
			deleted++
		}
	}
	var parts []string
	if wrote > 0 {
		parts = append(parts, fmt.Sprintf("wrote %d", wrote))
	}
	if migrations > 0 {
		parts = append(parts, plural(migrations, "new migration"))
	}
	if deleted > 0 {
		parts = append(parts, "deleted "+plural(deleted, "stale file"))
	}
	if len(parts) == 0 {
		return "all up to date"
	}
	return strings.Join(parts, ", ")
}

func check(file string, allowBreaking bool, e env) error {
	cfg, out, err := loadAllowing(file, allowBreaking, false, e)
	if err != nil {
		return err
	}
	problems, err := generator.Check(cfg.Dir, out)
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		fmt.Fprintf(e.stdout, "skipjack: %s up to date\n", plural(len(out.Files), "generated file"))
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(e.stderr, "%s: %s\n", displayPath(cfg, p.Path), p.Kind)
	}
	for _, p := range problems {
		fmt.Fprint(e.stderr, "\n", p.Diff)
	}
	fmt.Fprintf(e.stderr, "\nskipjack check: %s; run skipjack generate -f %s\n", plural(len(problems), "problem"), file)
	return errReported
}

// displayPath shows a path relative to the config's folder as the user
// would type it from the current folder.
func displayPath(cfg *config.Config, p string) string {
	full := filepath.Join(cfg.Dir, filepath.FromSlash(p))
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, full); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(full)
}

// plural returns "1 file" or "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
