package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/template"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// dashboardModule is the module the ui program imports; the user's module
// must require it.
const dashboardModule = "github.com/skipjack-dev/skipjack/dashboard"

// uiFlags adds the flags of skipjack ui.
func uiFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "serve on `ADDR` (host:port)")
	fs.BoolVar(&o.actions, "actions", false, "enable retry and cancel (off: read-only)")
}

// ui serves the web dashboard over the YAML's live queues until interrupted.
func ui(o options, e env) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUI(ctx, o, e)
}

// serveUI runs the dashboard the way migrate and stats run their work:
// through the user's own generated code. It builds a temporary program in
// the config's module that mounts github.com/skipjack-dev/skipjack/dashboard
// over every queue's Admin, runs it in the foreground with its output
// passed through, and on ctx's end asks it to shut down gracefully.
func serveUI(ctx context.Context, o options, e env) error {
	cfg, out, err := load(o.file, e)
	if err != nil {
		return err
	}
	if err := requireRuntime(cfg.Dir); err != nil {
		return err
	}
	if err := requireDashboard(cfg.Dir); err != nil {
		return err
	}
	problems, err := generator.Check(cfg.Dir, out)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("generated code is out of date (%s: %s); run skipjack generate -f %s first", displayPath(cfg, problems[0].Path), problems[0].Kind, o.file)
	}
	if !isLoopback(o.listen) {
		fmt.Fprintf(e.stderr, "skipjack ui: note: %s is reachable from other machines, and the dashboard has no authentication of its own\n", o.listen)
	}
	src, err := uiProgramSource(cfg, out)
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "skipjack-ui-")
	if err != nil {
		return fmt.Errorf("build the ui program: %w", err)
	}
	defer os.RemoveAll(bin)
	exe := filepath.Join(bin, "skipjack-ui")
	if err := buildProgram(ctx, cfg.Dir, filepath.Join(cfg.Dir, filepath.FromSlash(out.Out)), src, exe); err != nil {
		return err
	}
	c := exec.CommandContext(ctx, exe)
	c.Env = append(os.Environ(),
		"SKIPJACK_DATABASE_URL="+o.dbURL,
		"SKIPJACK_UI_LISTEN="+o.listen,
		"SKIPJACK_UI_ACTIONS="+fmt.Sprint(o.actions),
	)
	c.Stdout, c.Stderr = e.stdout, e.stderr
	// On ctx's end, ask for a graceful stop; kill only if it takes long.
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = 10 * time.Second
	if err := c.Run(); err != nil {
		if ctx.Err() != nil && c.ProcessState != nil && c.ProcessState.Success() {
			return nil
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return errReported // the program printed why
		}
		return fmt.Errorf("run the ui program: %w", err)
	}
	return nil
}

// isLoopback reports whether addr (host:port) listens only on this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireDashboard checks that the module holding dir requires the
// dashboard module, and otherwise says which go get adds it.
func requireDashboard(dir string) error {
	name, f, err := findGoMod(dir)
	if err != nil {
		return err
	}
	for _, r := range f.Require {
		if r.Mod.Path == dashboardModule {
			return nil
		}
	}
	get := "go get " + dashboardModule + "@latest"
	if rel := relToWD(filepath.Dir(name)); rel != "." {
		get = "cd " + rel + " && " + get
	}
	return fmt.Errorf("%s does not require %s, which skipjack ui runs in your module; run: %s", relToWD(name), dashboardModule, get)
}

// findGoMod returns the go.mod at or above dir, parsed.
func findGoMod(dir string) (string, *modfile.File, error) {
	for d := dir; ; d = filepath.Dir(d) {
		name := filepath.Join(d, "go.mod")
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			if filepath.Dir(d) == d {
				return "", nil, fmt.Errorf("no go.mod at or above %s", dir)
			}
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("read go.mod: %w", err)
		}
		f, err := modfile.ParseLax(name, data, nil)
		if err != nil {
			return "", nil, fmt.Errorf("read go.mod: %w", err)
		}
		return name, f, nil
	}
}

// uiQueue is one queue of the ui program: its import alias and path.
type uiQueue struct{ Alias, Path string }

// uiProgram is the temporary main of skipjack ui. It imports each queue
// package as "q" + its package name, which collides with none of the
// program's other imports.
var uiProgram = template.Must(template.New("ui").Parse(generator.GoHeader + `

// Command main is a temporary program that skipjack ui builds in this
// module and runs: the dashboard over the queues of config {{printf "%q" .Config}},
// through this module's own generated code.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/dashboard"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
{{range .Queues}}
	{{.Alias}} "{{.Path}}"
{{- end}}
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "skipjack ui:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("SKIPJACK_DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	actions := os.Getenv("SKIPJACK_UI_ACTIONS") == "true"
	h, err := dashboard.New(dashboard.Config{
		Queues: []skipjack.QueueAdmin{
{{- range .Queues}}
			{{.Alias}}.Admin(pool),
{{- end}}
		},
		Actions: actions,
		Title:   {{printf "%q" .Config}},
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", os.Getenv("SKIPJACK_UI_LISTEN"))
	if err != nil {
		return err
	}
	mode := "read-only"
	if actions {
		mode = "actions enabled"
	}
	fmt.Printf("skipjack ui: serving {{len .Queues}} queue(s) of {{.Config}} on http://%s/ (%s); Ctrl-C stops\n", ln.Addr(), mode)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
`))

// uiProgramSource renders the ui program of cfg.
func uiProgramSource(cfg *config.Config, out *generator.Output) ([]byte, error) {
	data := struct {
		Config string
		Queues []uiQueue
	}{Config: cfg.Name}
	for _, q := range cfg.LiveQueues() {
		data.Queues = append(data.Queues, uiQueue{Alias: "q" + q.Package, Path: out.Import + "/" + q.Package})
	}
	var b bytes.Buffer
	if err := uiProgram.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render the ui program: %w", err)
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format the ui program: %w\n%s", err, b.Bytes())
	}
	return src, nil
}
