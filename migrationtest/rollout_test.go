package migrationtest

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// rolloutVersion is one version of the rollout chain's config: the YAML of
// its two queues (refunds absent when its YAML is "").
type rolloutVersion struct {
	change  string // what changed from the version before: the subtest's name
	orders  string // the YAML under "orders:" (indented by 4)
	refunds string // the YAML under "refunds:", "" when the queue is absent
	// stopUsing names a queue that the release before this change stops
	// using (no worker, no producer), as the rollout table in
	// docs/reference.md says a queue is dropped.
	stopUsing string
	// contract generates with --contract: the contract step of the
	// changes rolled out in two steps.
	contract bool
}

// The base YAML of the chain's queues.
const (
	rolloutOrders  = "    payload: {customer_id: int64, n: int64}\n    retention: {completed: 1h}\n"
	rolloutRefunds = "    payload: {n: int64}\n    retention: {completed: 1h}\n"
)

// rolloutChain is every kind of YAML change that generate accepts, one
// after the other, each version the previous one plus one change. Each
// version's program is the "new" code of its step and the "old" code of
// the next, so every binary is built once.
func rolloutChain() []rolloutVersion {
	v := rolloutVersion{change: "initial", orders: rolloutOrders}
	var chain []rolloutVersion
	next := func(change string, edit func(v *rolloutVersion)) {
		chain = append(chain, v)
		v.change, v.stopUsing, v.contract = change, "", false
		edit(&v)
	}
	set := func(yaml *string, old, new string) {
		if !strings.Contains(*yaml, old) {
			panic(fmt.Sprintf("rollout chain: %q not in %q", old, *yaml))
		}
		*yaml = strings.Replace(*yaml, old, new, 1)
	}
	next("queue added", func(v *rolloutVersion) { v.refunds = rolloutRefunds })
	next("payload field added", func(v *rolloutVersion) { set(&v.orders, "n: int64}", `n: int64, note: "*string"}`) })
	next("max_attempts, storage parameters and retention changed", func(v *rolloutVersion) {
		v.orders += "    max_attempts: 5\n    table: {fillfactor: 80}\n"
		set(&v.orders, "completed: 1h}", "completed: 2h, failed: 48h}")
	})
	next("notify off", func(v *rolloutVersion) { v.orders += "    notify: false\n" })
	next("priority on", func(v *rolloutVersion) { v.orders += "    priority: true\n" })
	next("unique key added", func(v *rolloutVersion) { v.orders += "    unique: {by: [n]}\n" })
	next("serial key added", func(v *rolloutVersion) { v.orders += "    serial: {by: [customer_id]}\n" })
	next("serial key contracted", func(v *rolloutVersion) { v.contract = true })
	next("limits added (concurrency and rate)", func(v *rolloutVersion) {
		v.orders += "    limits: {concurrency: 4, rate: {count: 500, per: 1s}}\n"
	})
	next("limits removed", func(v *rolloutVersion) {
		set(&v.orders, "    limits: {concurrency: 4, rate: {count: 500, per: 1s}}\n", "")
	})
	next("per-key limit added", func(v *rolloutVersion) {
		v.orders += "    limits: {per_key: {by: [customer_id], concurrency: 2}}\n"
	})
	next("per-key limit removed", func(v *rolloutVersion) {
		set(&v.orders, "    limits: {per_key: {by: [customer_id], concurrency: 2}}\n", "")
	})
	next("serial key removed", func(v *rolloutVersion) { set(&v.orders, "    serial: {by: [customer_id]}\n", "") })
	next("unique key removed, priority off, notify on", func(v *rolloutVersion) {
		set(&v.orders, "    unique: {by: [n]}\n", "")
		set(&v.orders, "    priority: true\n", "")
		set(&v.orders, "    notify: false\n", "")
	})
	next("schedule added", func(v *rolloutVersion) {
		v.refunds += "    schedule:\n      - {cron: \"@every 1s\", payload: {n: 0}}\n"
	})
	next("schedule removed, payload field deprecated", func(v *rolloutVersion) {
		v.refunds = rolloutRefunds
		set(&v.orders, `note: "*string"`, `note: {type: "*string", deprecated: true}`)
	})
	next("payload field removed", func(v *rolloutVersion) {
		set(&v.orders, `, note: {type: "*string", deprecated: true}`, "")
	})
	next("queue dropped", func(v *rolloutVersion) {
		v.refunds += "    dropped: true\n"
		v.stopUsing = "refunds"
	})
	return append(chain, v)
}

// yaml returns the skipjack.yaml of v as version k, generated into
// internal/v<k>.
func (v rolloutVersion) yaml(k int) string {
	y := "version: 1\nname: rollout\nout: ./internal/v" + fmt.Sprint(k) + "\nmigrations: {dir: ./migrations}\nqueues:\n  orders:\n" + v.orders
	if v.refunds != "" {
		y += "  refunds:\n" + v.refunds
	}
	return y
}

// queues returns the queues v's code works and produces.
func (v rolloutVersion) queues() []string {
	if v.refunds == "" || strings.Contains(v.refunds, "dropped: true") {
		return []string{"orders"}
	}
	return []string{"orders", "refunds"}
}

// rolloutMain is the program of the whole chain, built once: every
// version is generated into a package tree of its own (out: internal/v<k>),
// so one binary holds every version's code, and -tag picks the version it
// runs as. With argument migrate it applies the version's migrations (its
// generated Migrate); otherwise it runs a worker of every queue of the
// version (WorkerID v<tag>) and a producer that enqueues a job into each
// every 20ms, with n = tag*1e6 + a sequence number and customer_id cycling
// through three values, so that jobs of one customer queue up behind each
// other. SIGUSR1 stops the producers, SIGTERM everything; it then prints
// what happened as JSON: claim statements and their errors (from a
// ClaimHook), enqueues and their errors, and the error of every Run.
var rolloutMain = template.Must(template.New("main").Parse(`package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
{{range $v := .}}
	v{{$v.K}} "example.com/migrationtest/internal/v{{$v.K}}"
{{- range $v.Queues}}
	v{{$v.K}}{{.}} "example.com/migrationtest/internal/v{{$v.K}}/{{.}}"
{{- end}}
{{- end}}
)

type summary struct {
	Claims, ClaimErrors, Enqueued, EnqueueErrors, Handled int64
	Errors                                               []string
	Spans                                                [][3]int64
}

type recorder struct {
	claims, claimErrors, enqueued, enqueueErrors, handled atomic.Int64

	mu     sync.Mutex
	errors []string
	spans  [][3]int64 // orders jobs: customer_id, handler start and end (Unix ns)
}

func (r *recorder) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errors) < 10 {
		r.errors = append(r.errors, fmt.Sprintf(format, args...))
	}
}

func (r *recorder) ClaimDone(c skipjack.ClaimInfo) {
	r.claims.Add(1)
	if c.Err != nil {
		r.claimErrors.Add(1)
		r.note("claim %s: %v", c.Queue, c.Err)
	}
}

func (r *recorder) handle(d time.Duration) error {
	time.Sleep(d)
	r.handled.Add(1)
	return nil
}

// handleKey is handle for a job of key, whose handler's span it records.
func (r *recorder) handleKey(key int64, d time.Duration) error {
	start := time.Now().UnixNano()
	r.handle(d)
	end := time.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, [3]int64{key, start, end})
	return nil
}

// produce calls enqueue every 20ms with the next sequence number until ctx
// ends.
func (r *recorder) produce(ctx context.Context, enqueue func(seq int64) error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seq := int64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := enqueue(seq); err != nil {
			r.enqueueErrors.Add(1)
			r.note("enqueue: %v", err)
			continue
		}
		r.enqueued.Add(1)
	}
}

// run is what one version runs.
type run struct {
	runCtx, produceCtx context.Context
	pool               *pgxpool.Pool
	r                  *recorder
	cfg                skipjack.WorkerConfig
	skipped            map[string]bool
	tag                int64
	wg                 *sync.WaitGroup
}

// worker runs w until the run ends.
func (x run) worker(queue string, w interface{ Run(context.Context) error }) {
	x.wg.Go(func() {
		if err := w.Run(x.runCtx); err != nil {
			x.r.note("run %s: %v", queue, err)
		}
	})
}
{{range $v := .}}
func run{{$v.K}}(x run) {
{{- range $v.Queues}}
	if !x.skipped[v{{$v.K}}{{.}}.Name] {
		x.worker(v{{$v.K}}{{.}}.Name, v{{$v.K}}{{.}}.NewWorker(x.pool, func(ctx context.Context, job *v{{$v.K}}{{.}}.Job) error {
{{- if eq . "orders"}}
			return x.r.handleKey(job.Payload.CustomerID, 10*time.Millisecond)
{{- else}}
			return x.r.handle(10 * time.Millisecond)
{{- end}}
		}, x.cfg))
		x.wg.Go(func() {
			x.r.produce(x.produceCtx, func(seq int64) error {
				_, err := v{{$v.K}}{{.}}.Enqueue(context.Background(), x.pool, v{{$v.K}}{{.}}.Payload{N: x.tag*1_000_000 + seq{{if eq . "orders"}}, CustomerID: seq % 3{{end}}})
				return err
			})
		})
	}
{{- end}}
}
{{end}}
var versions = map[int64]struct {
	migrate func(context.Context, *pgxpool.Pool) error
	run     func(run)
}{
{{- range $v := .}}
	{{$v.K}}: {v{{$v.K}}.Migrate, run{{$v.K}}},
{{- end}}
}

func main() {
	tag := flag.Int64("tag", 0, "version to run: WorkerID v<tag>, payloads n = tag*1e6 + seq")
	skip := flag.String("skip", "", "comma-separated queues not to work or produce")
	flag.Parse()
	ctx := context.Background()
	v := versions[*tag]
	pcfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pcfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer pool.Close()
	if flag.Arg(0) == "migrate" {
		if err := v.migrate(ctx, pool); err != nil {
			fmt.Fprintln(os.Stderr, "migrate:", err)
			os.Exit(1)
		}
		return
	}

	r := &recorder{}
	runCtx, stop := context.WithCancel(ctx)
	produceCtx, stopProducing := context.WithCancel(runCtx)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGTERM)
	go func() {
		for s := range signals {
			stopProducing()
			if s == syscall.SIGTERM {
				stop()
			}
		}
	}()
	skipped := map[string]bool{}
	for _, q := range strings.Split(*skip, ",") {
		skipped[q] = true
	}
	var wg sync.WaitGroup
	v.run(run{
		runCtx: runCtx, produceCtx: produceCtx, pool: pool, r: r, skipped: skipped, tag: *tag, wg: &wg,
		cfg: skipjack.WorkerConfig{
			WorkerID:     fmt.Sprintf("v%d", *tag),
			Concurrency:  4,
			PollInterval: 100 * time.Millisecond,
			Hooks:        r,
			Logger:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		},
	})
	fmt.Println("started")
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(summary{
		Claims: r.claims.Load(), ClaimErrors: r.claimErrors.Load(),
		Enqueued: r.enqueued.Load(), EnqueueErrors: r.enqueueErrors.Load(),
		Handled: r.handled.Load(), Errors: r.errors, Spans: r.spans,
	})
}
`))

// rolloutSummary is what a program prints when it stops.
type rolloutSummary struct {
	Claims, ClaimErrors, Enqueued, EnqueueErrors, Handled int64
	Errors                                                []string
	// Spans are the handler runs of orders jobs: customer_id, start and
	// end (Unix nanoseconds).
	Spans [][3]int64
}

// rolloutProc is a running program of one version.
type rolloutProc struct {
	tag    int
	queues []string // the queues it works and produces
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
}

// startRollout starts version tag's program and waits until it runs; it is
// killed when parent ends, if it still runs.
func startRollout(t, parent *testing.T, bin, dbURL string, tag int, queues []string, skip string) *rolloutProc {
	t.Helper()
	p := &rolloutProc{tag: tag, done: make(chan error, 1)}
	for _, q := range queues {
		if q != skip {
			p.queues = append(p.queues, q)
		}
	}
	p.cmd = exec.Command(bin, fmt.Sprintf("-tag=%d", tag), "-skip="+skip)
	p.cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		// The summary is one line holding every handler span of orders
		// jobs: a program that ran long (a slow step, a loaded machine)
		// prints more than the Scanner's default 64 KB token, which once
		// ended the scan and left the summary unread.
		sc.Buffer(make([]byte, 0, 64*1024), 256<<20)
		first := true
		for sc.Scan() {
			if first {
				started <- sc.Text() == "started"
				first = false
				continue
			}
			p.stdout.WriteString(sc.Text() + "\n")
		}
		if first {
			started <- false
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(&p.stdout, "reading the program's output: %v\n", err)
			_, _ = io.Copy(io.Discard, out)
		}
		p.done <- p.cmd.Wait()
	}()
	if !<-started {
		t.Fatalf("v%d did not start: %s", tag, p.stderr.String())
	}
	parent.Cleanup(func() { p.cmd.Process.Kill() })
	return p
}

// stop stops the program (SIGTERM: a graceful shutdown) and returns its
// summary.
func (p *rolloutProc) stop(t *testing.T) rolloutSummary {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("v%d: %v\nstderr:\n%s", p.tag, err, p.stderr.String())
		}
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("v%d did not stop within a minute after SIGTERM", p.tag)
	}
	var s rolloutSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &s); err != nil {
		t.Fatalf("v%d printed no summary (%v):\n%s\nstderr:\n%s", p.tag, err, p.stdout.String(), p.stderr.String())
	}
	return s
}

// expectClean fails t unless the program's claims, enqueues and Runs all
// succeeded.
func (p *rolloutProc) expectClean(t *testing.T, s rolloutSummary) {
	t.Helper()
	if s.ClaimErrors > 0 || s.EnqueueErrors > 0 || len(s.Errors) > 0 {
		t.Errorf("v%d: %d of %d claims and %d of %d enqueues failed; first errors:\n%s",
			p.tag, s.ClaimErrors, s.Claims, s.EnqueueErrors, s.Enqueued+s.EnqueueErrors, strings.Join(s.Errors, "\n"))
	}
}

// rolloutStepWindow bounds how long each version of a rollout step may take
// to complete its first jobs after the migration.
const rolloutStepWindow = 90 * time.Second

// TestRollouts checks the contract "rollouts never stop a queue" for every
// kind of YAML change that generate accepts (rolloutChain): with the
// database at version k-1 and version k-1's program running (workers and
// producers of every queue), version k's migrations are applied, version
// k's program starts beside it, and both must go on claiming and completing
// jobs of every queue they share (each completes jobs after the migration,
// by WorkerID) with no claim, enqueue or Run failing; then version k-1's
// program stops. At the end every job of every producer is completed.
//
// Each version is generated once (in order, as a project's migrations
// folder grows), into a package tree of its own, and one program holds
// them all: one build, one link.
func TestRollouts(t *testing.T) {
	if testing.Short() {
		t.Skip("generates, builds and runs 17 versions")
	}
	t.Parallel()
	begin := time.Now()
	chain := rolloutChain()
	p := newProject(t, chain[0].yaml(0))
	type versionData struct {
		K      int
		Queues []string
	}
	var data []versionData
	for k, v := range chain {
		p.write("skipjack.yaml", v.yaml(k))
		flags := []string{"generate", "--allow-breaking"}
		if v.contract {
			flags = append(flags, "--contract")
		}
		r := p.ok(flags...)
		for line := range strings.Lines(r.stdout) {
			if strings.HasPrefix(line, "skipjack.yaml:") {
				t.Logf("version %d (%s): %s", k, v.change, strings.TrimSpace(line))
			}
		}
		data = append(data, versionData{k, v.queues()})
	}
	var src bytes.Buffer
	if err := rolloutMain.Execute(&src, data); err != nil {
		t.Fatal(err)
	}
	p.write("main.go", src.String())
	goCommand(t, p.dir, nil, "mod", "tidy")
	generated := time.Since(begin)
	bin := filepath.Join(p.dir, "rollout")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = p.dir, projectEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the versions' program: %v\n%s", err, out)
	}
	keepMigrations(t, filepath.Join(p.dir, "migrations"), "rollout")
	t.Logf("generated %d versions in %v, built them in %v", len(chain), generated.Round(time.Millisecond), (time.Since(begin) - generated).Round(time.Millisecond))

	dbURL := skipjacktest.NewDatabase(t)
	conn := connect(t, dbURL)
	migrate := func(t *testing.T, k int) {
		t.Helper()
		cmd := exec.Command(bin, fmt.Sprintf("-tag=%d", k), "migrate")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("migrate to version %d (%s): %v\n%s", k, chain[k].change, err, out)
		}
	}
	migrate(t, 0)
	parent := t
	// Every program's handler spans of orders jobs, for the serial check.
	type ran struct {
		tag   int
		spans [][3]int64
	}
	var finished []ran
	stop := func(t *testing.T, p *rolloutProc) {
		t.Helper()
		s := p.stop(t)
		p.expectClean(t, s)
		finished = append(finished, ran{p.tag, s.Spans})
	}
	var serialRemoved time.Time // when the migration that removes the serial key started
	old := startRollout(t, t, bin, dbURL, 0, chain[0].queues(), "")
	for k := 1; k < len(chain); k++ {
		v := chain[k]
		ok := t.Run(v.change, func(t *testing.T) {
			stepStart := time.Now()
			if v.stopUsing != "" {
				// The release before the change: the same version without
				// the queue's worker and producer.
				replaced := old
				old = startRollout(t, parent, bin, dbURL, k-1, chain[k-1].queues(), v.stopUsing)
				stop(t, replaced)
			}
			if hasSerial(chain[k-1]) && !hasSerial(v) {
				serialRemoved = time.Now()
			}
			var migrated time.Time
			if err := conn.QueryRow(t.Context(), "SELECT now()").Scan(&migrated); err != nil {
				t.Fatal(err)
			}
			migrate(t, k)
			migrateTook := time.Since(stepStart)
			cur := startRollout(t, parent, bin, dbURL, k, v.queues(), "")
			// Both must complete jobs of every queue they work, after the
			// migration; the other's producer keeps enqueueing meanwhile.
			// The bound is generous: steps with a serial key or limits
			// took 5-10 s on a quiet machine (claims take turns across
			// the two programs), and one took over 30 s in CI at load 5-7.
			deadline := time.Now().Add(rolloutStepWindow)
			for _, proc := range []*rolloutProc{old, cur} {
				for _, q := range proc.queues {
					for {
						n := completedBy(t, conn, q, proc.tag, migrated)
						if n >= 5 {
							break
						}
						if time.Now().After(deadline) {
							t.Errorf("v%d completed %d jobs of %s in the %v after the migration to version %d (%s), want at least 5",
								proc.tag, n, q, rolloutStepWindow, k, v.change)
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
			stop(t, old)
			old = cur
			t.Logf("migrated in %v, both versions worked in %v", migrateTook.Round(time.Millisecond), time.Since(stepStart).Round(time.Millisecond))
		})
		if !ok && old.tag != k {
			// The step failed before the new version started: later steps
			// would test a chain with a gap.
			t.Fatalf("step %q left no program of version %d running", v.change, k)
		}
	}

	// The last version drains every queue, then stops.
	last := chain[len(chain)-1]
	old.cmd.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(time.Minute)
	for _, q := range last.queues() {
		for queryInt(t, conn, fmt.Sprintf(`SELECT count(*) FROM skipjack.%s WHERE state IN ('pending', 'running')`, q)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: jobs still pending or running a minute after the producers stopped", q)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stop(t, old)

	// Jobs of one customer never ran at once in the programs that know
	// the serial key (while it exists), whether it was expanding (claims
	// taking turns) or contracted (the unique index of running keys).
	var spans, unkeyed [][3]int64
	for _, r := range finished {
		for _, sp := range r.spans {
			if !hasSerial(chain[r.tag]) {
				unkeyed = append(unkeyed, sp)
			} else if sp[1] < serialRemoved.UnixNano() {
				spans = append(spans, sp)
			}
		}
	}
	// The check sees overlaps where they may happen: in the programs
	// without the key.
	n, _ := overlaps(unkeyed)
	t.Logf("jobs of one customer started while another ran: %d times in the programs without the serial key (%d jobs)", n, len(unkeyed))
	if len(spans) == 0 {
		t.Error("no orders job ran in a program that knows the serial key")
	}
	t.Logf("jobs of orders run by the programs that know the serial key, while it existed: %d", len(spans))
	if n, example := overlaps(spans); n > 0 {
		t.Errorf("%d times a job of one customer started while another ran in the programs that know the serial key, e.g. %s", n, example)
	}
	rows, err := conn.Query(t.Context(), `SELECT payload->>'n' IS NULL, (payload->>'n')::bigint / 1000000, state, count(*) FROM skipjack.orders GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	completed := map[int64]int64{}
	for rows.Next() {
		var noN bool
		var tag *int64
		var state string
		var n int64
		if err := rows.Scan(&noN, &tag, &state, &n); err != nil {
			t.Fatal(err)
		}
		if state != "completed" || tag == nil {
			t.Errorf("orders: %d jobs of producer %v are %s, want every job completed", n, tag, state)
			continue
		}
		completed[*tag] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range chain {
		if completed[int64(k)] == 0 {
			t.Errorf("orders: no job of version %d's producer (%s) completed", k, chain[k].change)
		}
	}
	t.Logf("%d versions rolled out in %v", len(chain), time.Since(begin).Round(time.Millisecond))
}

// completedBy counts the jobs of queue that version tag's workers completed
// since the instant since (database clock).
func completedBy(t *testing.T, conn *pgx.Conn, queue string, tag int, since time.Time) int64 {
	t.Helper()
	return queryInt(t, conn, fmt.Sprintf(`SELECT count(*) FROM skipjack.%s WHERE state = 'completed' AND worker LIKE $1 AND finished_at > $2`, queue),
		fmt.Sprintf("v%d/%%", tag), since)
}

// hasSerial reports whether v's orders queue has a serial key.
func hasSerial(v rolloutVersion) bool { return strings.Contains(v.orders, "serial:") }

// overlaps counts the spans (key, start, end) that start before an earlier
// span of their key ended, and describes the first.
func overlaps(spans [][3]int64) (int, string) {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b [3]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	n, example := 0, ""
	var busy [3]int64 // the span of the key that ends last so far
	for i, cur := range spans {
		if i > 0 && cur[0] == busy[0] && cur[1] < busy[2] {
			if n == 0 {
				example = fmt.Sprintf("customer %d: a job ran from %s to %s, another started at %s", cur[0],
					time.Unix(0, busy[1]).Format("15:04:05.000000"), time.Unix(0, busy[2]).Format("15:04:05.000000"), time.Unix(0, cur[1]).Format("15:04:05.000000"))
			}
			n++
		}
		if i == 0 || cur[0] != busy[0] || cur[2] > busy[2] {
			busy = cur
		}
	}
	return n, example
}
