package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/templates"
)

// programRequest is what the CLI asks of the temporary program (see
// templates/runmain.go.tmpl), passed as JSON in its only argument.
type programRequest struct {
	// Command is migrate, stats, list, get, retry or cancel.
	Command string `json:"command"`
	// Queue is the YAML name of the queue of list, get, retry and cancel.
	Queue string `json:"queue,omitempty"`
	// IDs are the jobs of get, retry and cancel.
	IDs []int64 `json:"ids,omitempty"`
	// State selects the jobs of list, and of retry and cancel without IDs.
	State string `json:"state,omitempty"`
	// AfterID and Limit page list.
	AfterID int64 `json:"after_id,omitempty"`
	Limit   int   `json:"limit,omitempty"`
}

// runInModule runs req through the user's own generated code and returns
// the program's JSON result: it renders the temporary main package into a
// hidden folder under out, builds it in the config's module (so with the
// runtime version the application's go.mod selects), deletes the folder,
// and runs the binary against dbURL. So `skipjack migrate` applies exactly
// the migrations that the application embeds.
func runInModule(req programRequest, file, dbURL string, e env) ([]byte, *config.Config, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, out, err := load(file, e)
	if err != nil {
		return nil, nil, err
	}
	if err := knownQueue(cfg, req.Queue); err != nil {
		return nil, nil, err
	}
	if err := requireRuntime(cfg.Dir); err != nil {
		return nil, nil, err
	}
	problems, err := generator.Check(cfg.Dir, out)
	if err != nil {
		return nil, nil, err
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("generated code is out of date (%s: %s); run skipjack generate -f %s first", displayPath(cfg, problems[0].Path), problems[0].Kind, file)
	}
	src, err := programSource(cfg, out)
	if err != nil {
		return nil, nil, err
	}
	bin, err := os.MkdirTemp("", "skipjack-run-")
	if err != nil {
		return nil, nil, fmt.Errorf("build the %s program: %w", req.Command, err)
	}
	defer os.RemoveAll(bin)
	exe := filepath.Join(bin, "skipjack-run")
	if err := buildProgram(ctx, cfg.Dir, filepath.Join(cfg.Dir, filepath.FromSlash(out.Out)), src, exe); err != nil {
		return nil, nil, err
	}
	arg, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s request: %w", req.Command, err)
	}
	var stdout, stderr bytes.Buffer
	c := exec.CommandContext(ctx, exe, string(arg))
	c.Env = append(os.Environ(), "SKIPJACK_DATABASE_URL="+dbURL)
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, nil, errors.New(msg)
		}
		return nil, nil, fmt.Errorf("run the %s program: %w", req.Command, err)
	}
	return stdout.Bytes(), cfg, nil
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

// buildProgram writes src as main.go of a hidden folder under outDir,
// builds it from the module at moduleDir into exe and deletes the folder.
// The folder's name starts with a dot, so `go build ./...` and
// `go vet ./...` in the module never see it. Folders that a killed run
// left behind are removed once they are an hour old.
func buildProgram(ctx context.Context, moduleDir, outDir string, src []byte, exe string) error {
	removeLeftovers(outDir, time.Hour)
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	dir := filepath.Join(outDir, programPrefix+hex.EncodeToString(suffix[:]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write the temporary program: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return fmt.Errorf("write the temporary program: %w", err)
	}
	rel, err := filepath.Rel(moduleDir, dir)
	if err != nil {
		return fmt.Errorf("write the temporary program: %w", err)
	}
	c := exec.CommandContext(ctx, "go", "build", "-o", exe, "./"+filepath.ToSlash(rel))
	c.Dir = moduleDir
	if msg, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("build the generated code with a temporary main (go build in %s): %w\n%s", moduleDir, err, bytes.TrimSpace(msg))
	}
	return nil
}

// programPrefix starts the name of every temporary program folder.
const programPrefix = ".skipjack-run-"

// removeLeftovers removes the temporary program folders under outDir that
// are older than age: a run killed with SIGKILL cannot remove its own.
// Younger ones may belong to a run in progress and are kept.
func removeLeftovers(outDir string, age time.Duration) {
	dirs, _ := filepath.Glob(filepath.Join(outDir, programPrefix+"*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > age {
			_ = os.RemoveAll(d)
		}
	}
}

// programSource renders the temporary program of cfg. The program imports
// the shared generated package as "shared" and each queue package as "q" +
// its name, which collides with neither that nor the program's other
// imports, whatever the queues are called.
func programSource(cfg *config.Config, out *generator.Output) ([]byte, error) {
	m := templates.RunMainFile{Config: cfg.Name, Shared: out.Import}
	for _, q := range cfg.LiveQueues() {
		m.Queues = append(m.Queues, templates.RunMainQueue{
			Name:   q.Name,
			Import: templates.Import{Name: "q" + q.Package, Path: out.Import + "/" + q.Package},
		})
	}
	src, err := templates.Execute(templates.RunMain, m)
	if err != nil {
		return nil, err
	}
	formatted, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("format the temporary program: %w\n%s", err, src)
	}
	return formatted, nil
}
