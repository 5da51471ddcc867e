package skipjack_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue"
	"github.com/skipjack-dev/skipjack/runtime/internal/testqueue/demo"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// Measuring throughput through PgBouncer at other sizes or in other modes:
//
//	go test -run TestPgBouncerWorkers -v -args -pgbouncer.jobs=50000 -pgbouncer.processes=8 -pgbouncer.modes=exec,simple_protocol
var (
	pgbouncerJobs      = flag.Int("pgbouncer.jobs", 20_000, "jobs each run of TestPgBouncerWorkers completes")
	pgbouncerModes     = flag.String("pgbouncer.modes", "exec", "comma-separated pgx query exec modes TestPgBouncerWorkers measures")
	pgbouncerProcesses = flag.Int("pgbouncer.processes", 4, "worker processes of each run of TestPgBouncerWorkers")
)

// bouncerModes are the pgx query exec modes that work through PgBouncer
// 1.18 in transaction pooling: those that send each statement's Parse,
// Bind and Execute before one Sync, so the whole statement runs on the
// server connection the pooler picked for it. Not among them:
// cache_statement, which executes named statements prepared on whichever
// server connection the pooler handed out earlier (PgBouncer 1.21+ with
// max_prepared_statements > 0 tracks those), and describe_exec, which
// prepares the unnamed statement, syncs, and then binds to "the unnamed
// statement" of what may by then be another client's server connection:
// it fails with "bind message supplies 4 parameters, but prepared
// statement "" requires 1" or, worse, runs that client's statement.
var bouncerModes = []pgx.QueryExecMode{
	pgx.QueryExecModeCacheDescribe,
	pgx.QueryExecModeExec,
	pgx.QueryExecModeSimpleProtocol,
}

// pgBouncer is a PgBouncer process started by a test.
type pgBouncer struct {
	port int
}

// route returns dbURL (a URL or keyword/value string naming a database of
// the test server) rewritten to reach the same database through b.
func (b *pgBouncer) route(t testing.TB, dbURL string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("parse %s: %v", dbURL, err)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(cfg.User),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)),
		Path:     "/" + cfg.Database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// startPgBouncer starts Debian's PgBouncer in transaction pooling on a
// free local port, in front of the test server, and stops it at cleanup.
// It skips the test when no pgbouncer binary is installed (.ci/run
// installs one).
func startPgBouncer(t *testing.T) *pgBouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		bin = "/usr/sbin/pgbouncer" // Debian installs it outside a user's PATH
		if _, err := os.Stat(bin); err != nil {
			t.Skip("pgbouncer is not installed (apt-get install pgbouncer); skipping the PgBouncer tests")
		}
	}
	base, err := skipjacktest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	server, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}

	// PgBouncer refuses to run as root: it then runs as postgres, which
	// must be able to read its files.
	dir, err := os.MkdirTemp("", "skipjack-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), fmt.Appendf(nil, "%q \"\"\n", server.User), 0o644); err != nil {
		t.Fatal(err)
	}
	var args []string
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("pgbouncer refuses to run as root and there is no postgres user to run it as: %v", err)
		}
		args = append(args, "-u", "postgres")
	}
	target := fmt.Sprintf("host=%s port=%d", server.Host, server.Port)
	if server.Password != "" {
		target += " password=" + server.Password
	}
	// The free port may be taken before PgBouncer binds it: then it exits
	// at once, and another port is tried.
	for attempt := 1; ; attempt++ {
		b, err := runPgBouncer(t, bin, args, dir, target, base)
		if err == nil {
			return b
		}
		if attempt == 3 {
			t.Fatal(err)
		}
	}
}

// runPgBouncer starts PgBouncer on a free port with its files in dir, in
// front of target (host, port and password of the test server), and waits
// until it answers for base. It returns an error if PgBouncer exited at
// start.
func runPgBouncer(t *testing.T, bin string, args []string, dir, target, base string) (*pgBouncer, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	user := cfg.User
	b := &pgBouncer{port: freePort(t)}
	ini := fmt.Sprintf(`[databases]
* = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 10
server_reset_query =
ignore_startup_parameters = extra_float_digits
admin_users = %s
`, target, b.port, filepath.Join(dir, "users.txt"), user)
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(iniPath, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(slices.Clone(args), iniPath)...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("pgbouncer exited at start (%v):\n%s", err, out.String())
		default:
		}
		err := b.ping(t, base)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("pgbouncer did not accept connections within 10s: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("pgbouncer output:\n%s", out.String())
		}
	})
	return b, nil
}

// freePort returns a local TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ping checks that b's port is PgBouncer's (asking its admin console for
// its version, so that another server on a reused port cannot pass for it)
// and that it reaches the test server's database of base.
func (b *pgBouncer) ping(t testing.TB, base string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	admin, err := pgx.ParseConfig(b.route(t, base))
	if err != nil {
		return err
	}
	admin.Database = "pgbouncer"
	admin.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // all the admin console speaks
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return err
	}
	var version string
	err = conn.QueryRow(ctx, "SHOW VERSION").Scan(&version)
	conn.Close(context.Background())
	if err != nil {
		return err
	}
	if !strings.Contains(version, "PgBouncer") {
		return fmt.Errorf("port %d answers SHOW VERSION with %q, not PgBouncer", b.port, version)
	}
	conn, err = pgx.Connect(ctx, b.route(t, base))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// lockedBuffer is a bytes.Buffer safe for a process's output and a reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPgBouncer runs exerciseQueues through PgBouncer in transaction
// pooling with polling workers, in each exec mode that PgBouncer 1.18
// supports; the pools also migrate the schema through it.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	b := startPgBouncer(t)
	for _, mode := range bouncerModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			pool := newModePool(t, mode, 24, func(u string) string { return b.route(t, u) })
			exerciseQueues(t, pool, true)
		})
	}
}

// TestPgBouncerMigrate runs Migrate from eight goroutines at once through
// PgBouncer in transaction pooling, where consecutive statements of one
// client may run on different server sessions: a session advisory lock
// would be taken on one and released (or not) on another. All calls
// succeed, each migration is recorded once, and a later call is a no-op.
func TestPgBouncerMigrate(t *testing.T) {
	t.Parallel()
	b := startPgBouncer(t)
	dbURL := skipjacktest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(b.route(t, dbURL))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.MaxConns = 16
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = testqueue.Migrate(ctx, pool) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Migrate through PgBouncer: %v", err)
	}
	ups, err := filepath.Glob("internal/testqueue/migrations/*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no generated migrations found: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM skipjack._skipjack_migrations WHERE config = 'testqueue'`); n != int64(len(ups)) {
		t.Errorf("%d migrations recorded, want the %d generated ones", n, len(ups))
	}
	if err := testqueue.Migrate(ctx, pool); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); n != 0 {
		t.Errorf("%d advisory locks still held after Migrate returned, want 0", n)
	}
}

// TestPgBouncerWorkers completes the same number of jobs with several
// polling worker processes, once connected directly and once through
// PgBouncer in transaction pooling, and checks that every job ran exactly
// once. It logs both throughputs and the CPU time the database's backends
// and the workers spent per job. By default it runs 4 processes in pgx's
// exec mode with 20,000 jobs (see the flags above).
func TestPgBouncerWorkers(t *testing.T) {
	t.Parallel()
	b := startPgBouncer(t)
	for _, name := range strings.Split(*pgbouncerModes, ",") {
		mode, ok := parseExecMode(name)
		if !ok {
			t.Fatalf("-pgbouncer.modes: unknown mode %q", name)
		}
		direct := burnThrough(t, mode, nil)
		t.Logf("%v, direct: %v", mode, direct)
		if !slices.Contains(bouncerModes, mode) {
			t.Logf("%v: PgBouncer 1.18 cannot run this mode", mode)
			continue
		}
		bounced := burnThrough(t, mode, func(u string) string { return b.route(t, u) })
		t.Logf("%v, through PgBouncer: %v (%.0f%% of direct)", mode, bounced, 100*bounced.rate/direct.rate)
	}
}

// burnResult is what one run of burnThrough measured.
type burnResult struct {
	processes, jobs int
	// rate is in jobs per second.
	rate float64
	// dbCPU is the CPU time the database's backends spent during the run,
	// or -1 when the server is not on this machine.
	dbCPU time.Duration
	// workerCPU is the CPU time the worker processes spent.
	workerCPU time.Duration
}

func (r burnResult) String() string {
	perJob := func(d time.Duration) string {
		if d < 0 {
			return "unknown"
		}
		return fmt.Sprintf("%.0fµs", float64(d.Microseconds())/float64(r.jobs))
	}
	return fmt.Sprintf("%d processes, %d jobs: %.0f jobs/s; CPU per job: Postgres backends %s, workers %s",
		r.processes, r.jobs, r.rate, perJob(r.dbCPU), perJob(r.workerCPU))
}

// burnThrough enqueues the jobs on a fresh database, works them off with
// child processes connected through route (directly when nil) in mode,
// and checks that each job ran once.
func burnThrough(t *testing.T, mode pgx.QueryExecMode, route func(string) string) burnResult {
	t.Helper()
	pool := newQueues(t, 4)
	n := *pgbouncerJobs
	enqueueDemo(t, pool, n)
	workerURL := pool.Config().ConnString()
	if route != nil {
		workerURL = route(workerURL)
	}
	workerURL = withParams(t, workerURL, "default_query_exec_mode="+execModeName(mode), fmt.Sprintf("pool_max_conns=%d", pollBurnConcurrency+3))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// One connection watches the table, rarely enough to stay out of the
	// measurement; its backend's CPU is not counted.
	watch, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Release()
	cpuBefore := backendCPU(ctx, t, watch.Conn())

	begin := time.Now()
	dir := t.TempDir()
	children := make([]*child, *pgbouncerProcesses)
	for i := range children {
		children[i] = startChildURL(t, "pollburn", workerURL, childOutEnv+"="+filepath.Join(dir, strconv.Itoa(i)))
	}
	for empty := false; !empty; {
		time.Sleep(100 * time.Millisecond)
		if err := watch.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM skipjack.demo)`).Scan(&empty); err != nil {
			t.Fatalf("waiting for the queue to be empty: %v", err)
		}
	}
	res := burnResult{processes: len(children), jobs: n, rate: float64(n) / time.Since(begin).Seconds(), dbCPU: -1}
	if cpuAfter := backendCPU(ctx, t, watch.Conn()); cpuBefore != nil && cpuAfter != nil {
		res.dbCPU = 0
		for pid, d := range cpuAfter {
			res.dbCPU += d - cpuBefore[pid]
		}
	}

	runs := newTally()
	for i, c := range children {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatalf("signal child: %v", err)
		}
		if err := c.wait(); err != nil {
			t.Fatalf("child exited with %v; output:\n%s", err, c.output.String())
		}
		res.workerCPU += c.cmd.ProcessState.UserTime() + c.cmd.ProcessState.SystemTime()
		ids := readIDs(t, filepath.Join(dir, strconv.Itoa(i)))
		if len(ids) == 0 {
			t.Errorf("child %d ran no job", i)
		}
		for _, id := range ids {
			runs.add(id)
		}
	}
	if runs.len() != n {
		t.Errorf("%d distinct jobs ran, want %d", runs.len(), n)
	}
	if d := runs.duplicates(); d != 0 {
		t.Errorf("%d jobs ran more than once", d)
	}
	return res
}

// backendCPU returns the CPU time each backend connected to conn's database
// (other than conn's own) has used, by pid, read from /proc; nil when the
// backends are not processes of this machine. It assumes Linux's usual 100
// clock ticks per second.
func backendCPU(ctx context.Context, t *testing.T, conn *pgx.Conn) map[int]time.Duration {
	t.Helper()
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatalf("list backends: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatalf("list backends: %v", err)
	}
	cpu := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil
		}
		// The fields after the command's closing parenthesis start with
		// the state (field 3); utime and stime are fields 14 and 15.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			return nil
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return nil
		}
		cpu[int(pid)] = time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return cpu
}

// execModeName returns mode's name as pgx's default_query_exec_mode
// connection parameter spells it.
func execModeName(mode pgx.QueryExecMode) string {
	return strings.ReplaceAll(mode.String(), " ", "_")
}

// parseExecMode returns the mode execModeName calls name.
func parseExecMode(name string) (pgx.QueryExecMode, bool) {
	for _, m := range execModes {
		if execModeName(m) == name {
			return m, true
		}
	}
	return 0, false
}

// withParams adds query parameters to a connection URL.
func withParams(t testing.TB, u string, params ...string) string {
	t.Helper()
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return u + " " + strings.Join(params, " ")
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + strings.Join(params, "&")
}

// pollBurnConcurrency is the Concurrency of a "pollburn" child's worker.
const pollBurnConcurrency = 32

// runPollBurn is the "pollburn" child: a polling demo worker (no LISTEN, as
// PgBouncer's transaction pooling needs) that writes the ids it completed
// to a file when it stops.
func runPollBurn(ctx context.Context, pool *pgxpool.Pool) error {
	var mu sync.Mutex
	var ids []int64
	w := demo.NewWorker(pool, func(ctx context.Context, job *demo.Job) error {
		mu.Lock()
		ids = append(ids, job.ID)
		mu.Unlock()
		return nil
	}, skipjack.WorkerConfig{Concurrency: pollBurnConcurrency, PollOnly: true})
	if err := w.Run(ctx); err != nil {
		return err
	}
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintln(&b, id)
	}
	return os.WriteFile(os.Getenv(childOutEnv), []byte(b.String()), 0o644)
}
