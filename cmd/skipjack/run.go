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

const usage = `usage: skipjack <command> [flags]

commands:
  generate   write the migrations, sqlc code and queue packages the YAML declares
  check      write nothing; exit 1 listing every generated file that is changed,
             missing or stale and every migration the YAML needs
  migrate    apply pending migrations to a database
  stats      print per-queue job counts

flags:
  -f FILE             the config file (default ./skipjack.yaml)
  --database-url URL  the database for migrate and stats (default $DATABASE_URL)
  --json              stats: print JSON
`

// run executes the command line args and returns the exit status.
func run(args []string, e env) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("skipjack "+cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	file := fs.String("f", "skipjack.yaml", "the config `file`")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "the database `URL` (migrate, stats)")
	asJSON := fs.Bool("json", false, "print JSON (stats)")
	switch cmd {
	case "generate", "check", "migrate", "stats":
	default:
		fmt.Fprintf(e.stderr, "skipjack: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	if err := fs.Parse(rest); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "skipjack %s: unexpected arguments %q\n", cmd, fs.Args())
		return exitUsage
	}
	var err error
	switch cmd {
	case "generate":
		err = generate(*file, e)
	case "check":
		err = check(*file, e)
	case "migrate", "stats":
		if *dbURL == "" {
			fmt.Fprintf(e.stderr, "skipjack %s: no database: pass --database-url or set DATABASE_URL\n", cmd)
			return exitUsage
		}
		err = runInModule(cmd, *file, *dbURL, *asJSON, e)
	}
	if err != nil {
		var ce config.Errors
		if errors.As(err, &ce) {
			for _, x := range ce {
				fmt.Fprintln(e.stderr, x.Error())
			}
		} else if !errors.Is(err, errDrift) {
			fmt.Fprintf(e.stderr, "skipjack %s: %v\n", cmd, err)
		}
		return exitFailure
	}
	return exitOK
}

// errDrift reports that check found differences (already printed).
var errDrift = errors.New("generated files are out of date")

// load loads the config and generates its files in memory.
func load(file string, e env) (*config.Config, *generator.Output, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, nil, err
	}
	out, err := generator.Generate(cfg, generator.Options{SQLC: e.sqlc})
	if err != nil {
		return nil, nil, err
	}
	return cfg, out, nil
}

func generate(file string, e env) error {
	start := time.Now()
	cfg, out, err := load(file, e)
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
	fmt.Fprintf(e.stdout, "skipjack: %s, %s up to date (%d changed) in %v\n",
		plural(len(cfg.LiveQueues()), "queue"), plural(len(out.Files), "file"), len(touched), time.Since(start).Round(time.Millisecond))
	return nil
}

func check(file string, e env) error {
	cfg, out, err := load(file, e)
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
	return errDrift
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
