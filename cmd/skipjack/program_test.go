package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// TestProgram renders the temporary program of a config whose queue
// packages are named like the program's own imports (shared, json), vets it with the generated code in a temp module, and builds it
// the way migrate and stats do.
func TestProgram(t *testing.T) {
	t.Parallel()
	runtimeDir, err := filepath.Abs("../../runtime")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "go.mod"), `module example.com/program

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/skipjack-dev/skipjack/runtime v0.0.0
)

replace github.com/skipjack-dev/skipjack/runtime => `+runtimeDir+"\n")
	writeTestFile(t, filepath.Join(dir, "skipjack.yaml"), `version: 1
out: ./internal/jobs
queues:
  shared:
    payload: {n: int}
  json:
    payload: {n: int}
  send_email:
    payload: {n: int}
  gone:
    payload: {n: int}
    dropped: true
`)
	cfg, err := config.Load(filepath.Join(dir, "skipjack.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := generator.Generate(cfg, generator.Options{SQLC: generator.SQLCRunner(exe)})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if _, err := generator.Write(dir, out); err != nil {
		t.Fatal(err)
	}
	src, err := programSource(cfg, out)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	// Line 2, not 1: a check running beside migrate must not call the
	// program a stale generated file.
	if first, rest, _ := strings.Cut(string(src), "\n"); first == generator.GoHeader || !strings.HasPrefix(rest, generator.GoHeader+"\n") {
		t.Errorf("the program's line 2, and not its line 1, must be the generated-code header:\n%s", src)
	}
	for _, want := range []string{
		`qshared "example.com/program/internal/jobs/shared"`,
		`qjson "example.com/program/internal/jobs/json"`,
		`qsendemail.Admin(pool),`,
		`shared "example.com/program/internal/jobs"`,
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the program lacks %q:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "gone") {
		t.Errorf("the program mentions the dropped queue:\n%s", src)
	}

	goTool(t, dir, "mod", "tidy")
	vetDir := filepath.Join(dir, "internal", "jobs", ".skipjack-vet")
	writeTestFile(t, filepath.Join(vetDir, "main.go"), string(src))
	goTool(t, dir, "vet", "./internal/jobs/.skipjack-vet")
	if err := os.RemoveAll(vetDir); err != nil {
		t.Fatal(err)
	}

	// A folder a killed run left two hours ago goes; one of a run in
	// progress stays.
	jobsDir := filepath.Join(dir, "internal", "jobs")
	old, current := filepath.Join(jobsDir, ".skipjack-run-old"), filepath.Join(jobsDir, ".skipjack-run-current")
	writeTestFile(t, filepath.Join(old, "main.go"), "package main\n")
	writeTestFile(t, filepath.Join(current, "main.go"), "package main\n")
	twoHoursAgo := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, twoHoursAgo, twoHoursAgo); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "program")
	if err := buildProgram(context.Background(), dir, filepath.Join(dir, "internal", "jobs"), src, bin); err != nil {
		t.Fatalf("build: %v", err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Errorf("build wrote no binary: %v", err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(jobsDir, ".skipjack-*"))
	if !slices.Equal(leftovers, []string{current}) {
		t.Errorf("after the build, %q are left; want only the folder of the run in progress", leftovers)
	}
}

// goTool runs the go command in dir outside any workspace.
func goTool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func writeTestFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
