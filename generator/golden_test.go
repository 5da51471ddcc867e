package generator_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/generator/sqlcrun"
)

var update = flag.Bool("update", false, "rewrite the golden files under ../golden")

// sqlc runs sqlc for Generate: a child process of the skipjack CLI built
// once by TestMain (without -race, so the sqlc leaf is built only once and
// from the normal build cache).
var sqlc func(dir string) error

// goSlots limits how many go commands (tidy, vet, test) of temp modules run
// at once, so parallel cases do not oversubscribe a small machine.
var goSlots = make(chan struct{}, 2)

// goldenRoot is the folder of the golden cases, relative to this package.
const goldenRoot = "../golden"

// runtimeDir is the absolute path of the runtime module, which temp modules
// replace github.com/skipjack-dev/skipjack/runtime with.
var runtimeDir string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "skipjack-golden-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	exe := filepath.Join(tmp, "skipjack")
	build := exec.Command("go", "build", "-o", exe, "github.com/skipjack-dev/skipjack/cmd/skipjack")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the skipjack CLI: %v\n%s", err, out)
		return 1
	}
	sqlc = sqlcrun.Runner(exe)
	if runtimeDir, err = filepath.Abs("../runtime"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// goldenCases are the folders under golden/ that hold a case: a
// skipjack.yaml, any extra inputs, and the expected tree under expected/.
var goldenCases = []struct {
	name string
	// postgres: also run an end-to-end test of the output against
	// PostgreSQL (see e2eTest).
	postgres bool
	// tests: run the case's own tests (*_test.go.txt inputs).
	tests bool
}{
	{name: "minimal", postgres: true},
	{name: "every_type"},
	{name: "shared_types"},
	{name: "external_type"},
	{name: "many_queues"},
	{name: "priority_retry"},
	{name: "unique"},
	{name: "schedule"},
	{name: "flow"},
	// per_key: limits.per_key beside concurrency, rate and priority; its
	// own tests run the queues against PostgreSQL.
	{name: "per_key", tests: true},
	// defaults: payload field defaults, filled in by a generated
	// UnmarshalJSON, also for jobs inserted by SQL.
	{name: "defaults", tests: true},
	// tern: an evolution in the tern format; migrations/ holds the first
	// migration as generate wrote it, which Migrate must embed unchanged.
	{name: "tern", postgres: true},
	// goose_live: a live update in the goose format (priority on and a
	// unique key added to a table of the first migration): non-transactional
	// units with -- +goose NO TRANSACTION, which the generated Migrate
	// applies outside a transaction.
	{name: "goose_live", postgres: true},
	// workflows: a diamond of steps across queues with typed outputs; its
	// tests run the steps with workers against PostgreSQL (fan-in under
	// concurrency, the failure policy, cancel, retry, outputs, atomic
	// Start).
	{name: "workflows", tests: true},
}

// TestGolden generates every case in a temp module, compares the output
// (generated packages and migrations) with the case's goldens, then
// compiles and vets it; the minimal case also runs against PostgreSQL.
// With -update it rewrites the goldens instead of comparing.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newCaseModule(t, tc.name)
			out := generateAndWrite(t, dir)
			compareGolden(t, filepath.Join(goldenRoot, tc.name, "expected"), out)
			if tc.postgres {
				writeFile(t, filepath.Join(dir, "e2e_test.go"), fmt.Sprintf(e2eTest, tc.name))
			}
			goCmd(t, dir, "mod", "tidy")
			goCmd(t, dir, "vet", "./...")
			if tc.postgres || tc.tests {
				goCmd(t, dir, "test", "-count=1", "./...")
			}
		})
	}
}

// TestDeterministic generates the every_type case in two different folders
// and expects byte-identical output: no map order, timestamps or absolute
// paths may leak into it.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	first := generate(t, newCaseModule(t, "every_type"))
	second := generate(t, newCaseModule(t, "every_type"))
	a, b := outputFiles(first), outputFiles(second)
	if len(a) != len(b) {
		t.Fatalf("first run generated %d files, second run %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path {
			t.Fatalf("file %d: first run %s, second run %s", i, a[i].Path, b[i].Path)
		}
		if !bytes.Equal(a[i].Data, b[i].Data) {
			t.Errorf("%s differs between runs:\n%s", a[i].Path,
				generator.UnifiedDiff("first", "second", string(a[i].Data), string(b[i].Data)))
		}
	}
}

// TestGoldenErrors checks the diagnostics of every golden/errors/NAME.yaml
// against NAME.stderr.golden, rendered as the CLI prints them: one
// "skipjack.yaml:LINE:COL: message" per line. Configs that parse are then
// generated in a temp module, for errors that need Go packages.
func TestGoldenErrors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(goldenRoot, "errors", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no error cases in golden/errors")
	}
	for _, input := range inputs {
		name := strings.TrimSuffix(filepath.Base(input), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(input)
			if err != nil {
				t.Fatal(err)
			}
			err = configOrGenerateError(t, data)
			var ce config.Errors
			if !errors.As(err, &ce) {
				t.Fatalf("got error %v (%T), want config.Errors", err, err)
			}
			var got strings.Builder
			for _, e := range ce {
				e.File = "skipjack.yaml" // Generate names the temp module's file
				fmt.Fprintln(&got, e.Error())
			}
			checkGolden(t, strings.TrimSuffix(input, ".yaml")+".stderr.golden", []byte(got.String()))
		})
	}
}

// configOrGenerateError returns the error of parsing data as skipjack.yaml
// or, when it parses, of generating it in a temp module.
func configOrGenerateError(t *testing.T, data []byte) error {
	t.Helper()
	if _, err := config.Parse("skipjack.yaml", data); err != nil {
		return err
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/golden/errors\n\ngo 1.26\n")
	writeFile(t, filepath.Join(dir, "skipjack.yaml"), string(data))
	cfg, err := config.Load(filepath.Join(dir, "skipjack.yaml"))
	if err != nil {
		return err
	}
	if _, err := generator.Generate(cfg, generator.Options{SQLC: sqlc}); err != nil {
		return err
	}
	t.Fatal("config generates without errors; want a diagnostic")
	return nil
}

// newCaseModule copies the inputs of golden/<name> into a temp module named
// example.com/golden/<name> that requires the local runtime, and returns its
// folder. Go inputs are stored as *.go.txt so the root module does not
// compile them; they get their .go name back here.
func newCaseModule(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join(goldenRoot, name)
	dir := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel == "expected" {
				return filepath.SkipDir
			}
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		target := filepath.Join(dir, strings.TrimSuffix(rel, ".go.txt"))
		if strings.HasSuffix(rel, ".go.txt") {
			target += ".go"
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy case %s: %v", name, err)
	}
	writeFile(t, filepath.Join(dir, "go.mod"), fmt.Sprintf(`module example.com/golden/%s

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/skipjack-dev/skipjack/runtime v0.0.0
)

replace github.com/skipjack-dev/skipjack/runtime => %s
`, name, runtimeDir))
	return dir
}

// generate loads dir/skipjack.yaml and generates it in memory.
func generate(t *testing.T, dir string) *generator.Output {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, "skipjack.yaml"))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	out, err := generator.Generate(cfg, generator.Options{SQLC: sqlc})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	return out
}

// generateAndWrite generates dir/skipjack.yaml and writes the output there.
func generateAndWrite(t *testing.T, dir string) *generator.Output {
	t.Helper()
	out := generate(t, dir)
	if _, err := generator.Write(dir, out); err != nil {
		t.Fatalf("write: %v", err)
	}
	return out
}

// outputFiles is every file of out, generated packages and new migrations,
// sorted by path.
func outputFiles(out *generator.Output) []generator.File {
	files := slices.Concat(out.Files, out.NewMigrations)
	slices.SortFunc(files, func(a, b generator.File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// compareGolden compares every file of out with expected/<path>.golden and
// reports goldens that out does not produce. With -update it replaces the
// expected tree with out.
func compareGolden(t *testing.T, expected string, out *generator.Output) {
	t.Helper()
	files := outputFiles(out)
	if *update {
		if err := os.RemoveAll(expected); err != nil {
			t.Fatal(err)
		}
	}
	produced := map[string]bool{}
	for _, f := range files {
		golden := filepath.Join(expected, filepath.FromSlash(f.Path)+".golden")
		produced[golden] = true
		checkGolden(t, golden, f.Data)
	}
	err := filepath.WalkDir(expected, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !produced[p] {
			t.Errorf("%s: golden file, but the case does not generate it", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkGolden compares got with the golden file, or rewrites it with
// -update.
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Errorf("%v (run go test ./generator -update to create it)", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: generated output differs from the golden file (run go test ./generator -update if this is intended):\n%s",
			golden, generator.UnifiedDiff(golden+" (want)", "generated (got)", string(want), string(got)))
	}
}

// goCmd runs the go command in the temp module dir, without the repo's
// go.work, at most two at a time.
func goCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	goSlots <- struct{}{}
	defer func() { <-goSlots }()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s in the generated module: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// writeFile writes a file the test needs, creating its folder.
func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// e2eTest is a test written into the minimal case's temp module (%[1]s is
// the case name): in each of pgx's five query exec modes it migrates a fresh
// database, enqueues jobs one by one and with COPY, works them until all are
// handled and expects empty stats.
const e2eTest = `package e2e_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"example.com/golden/%[1]s/jobs"
	"example.com/golden/%[1]s/jobs/ping"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// TestEndToEnd runs the queue in each of pgx's query exec modes, each on a
// database of its own: the generated queries must work with all of them
// (exec and simple_protocol are what poolers without prepared statements
// need).
func TestEndToEnd(t *testing.T) {
	modes := []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol,
	}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := skipjacktest.NewPoolConfig(t, func(c *pgxpool.Config) {
				c.ConnConfig.DefaultQueryExecMode = mode
			})
			endToEnd(t, pool)
		})
	}
}

func endToEnd(t *testing.T, pool *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 { // Migrate is idempotent
		if err := jobs.Migrate(ctx, pool); err != nil {
			t.Fatalf("migrate: %%v", err)
		}
	}
	if _, err := ping.Enqueue(ctx, pool, ping.Payload{Message: "one"}); err != nil {
		t.Fatalf("enqueue: %%v", err)
	}
	n, err := ping.EnqueueMany(ctx, pool, []ping.Payload{{Message: "two"}, {Message: "three"}})
	if err != nil || n != 2 {
		t.Fatalf("enqueue many: got (%%d, %%v), want (2, nil)", n, err)
	}

	var mu sync.Mutex
	var handled []string
	all := make(chan struct{})
	w := ping.NewWorker(pool, func(ctx context.Context, job *ping.Job) error {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, job.Payload.Message)
		if len(handled) == 3 {
			close(all)
		}
		return nil
	}, skipjack.WorkerConfig{PollInterval: 50 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatal("timed out waiting for 3 jobs to be handled")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("worker: %%v", err)
	}

	mu.Lock()
	slices.Sort(handled)
	if want := []string{"one", "three", "two"}; !slices.Equal(handled, want) {
		t.Errorf("handled %%q, want %%q", handled, want)
	}
	mu.Unlock()
	stats, err := ping.Stats(ctx, pool)
	if err != nil {
		t.Fatalf("stats: %%v", err)
	}
	if stats != (skipjack.Stats{}) {
		t.Errorf("stats after draining: got %%+v, want all zero", stats)
	}
	if _, err := ping.Get(ctx, pool, 1); !errors.Is(err, skipjack.ErrNotFound) {
		t.Errorf("Get of a completed, deleted job: got %%v, want an error matching skipjack.ErrNotFound", err)
	}
}
`
