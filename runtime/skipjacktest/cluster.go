package skipjacktest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Cluster is a PostgreSQL cluster of a test's own: its own initdb'd data
// folder and server process, listening on 127.0.0.1 on a free TCP port and
// on a unix socket in its own folder, with trust authentication for the
// user postgres. Unlike the shared server behind NewDatabase, a test may
// restart or stop it (to test what clients do when the server goes away)
// and run several at once (to test queues on separate clusters).
//
// Create one with NewCluster. Restart, Stop and Start fail the test with
// t.Fatalf, so call them from the test's goroutine (or a subtest's); they
// are serialized, and URL, Port and SocketDir may be read from anywhere.
type Cluster struct {
	mu sync.Mutex // serializes Restart, Stop and Start
	lc *localCluster
}

// NewCluster starts a throwaway PostgreSQL cluster for the test and returns
// it once it accepts connections. It finds initdb and pg_ctl like the
// harness does (PATH, then the newest /usr/lib/postgresql/*/bin) and runs
// them as the postgres OS user when the test runs as root. The server runs
// with fsync off and max_connections 200.
//
// The cluster is stopped (immediate mode) and its folder removed when the
// test and its subtests have finished; if the test binary dies first, a
// detached watchdog does the same within about a second of its exit.
//
// NewCluster skips the test when the PostgreSQL server binaries are not
// installed at all, and fails it when they are but the cluster cannot be
// started. Starting one takes about a second or two (initdb included).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := findBinDir()
	if err != nil {
		t.Skipf("skipjacktest: NewCluster needs the PostgreSQL server binaries: %v (install them, e.g. apt-get install postgresql)", err)
	}
	lc, err := newLocalCluster(bin)
	if err != nil {
		t.Fatalf("skipjacktest: new cluster: %v", err)
	}
	t.Cleanup(lc.stop)
	// Another process may take the free port between our probe and the
	// server's bind: try a few ports before giving up.
	for attempt := 1; ; attempt++ {
		port, err := reservePort()
		if err != nil {
			t.Fatalf("skipjacktest: find a free port: %v", err)
		}
		lc.port = port
		err = lc.start()
		if err == nil {
			break
		}
		releasePort(port)
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatalf("skipjacktest: start cluster: %v", err)
		}
	}
	t.Cleanup(func() { releasePort(lc.port) })
	lc.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", lc.port)
	lc.requireReady(t, "started")
	return &Cluster{lc: lc}
}

// URL returns the connection URL of the cluster's maintenance database
// (postgres://postgres@127.0.0.1:<port>/postgres?sslmode=disable). The
// cluster is the test's own, so using that database directly is fine.
func (c *Cluster) URL() string { return c.lc.url }

// Port returns the TCP port the cluster listens on. It stays the same
// across Restart, Stop and Start.
func (c *Cluster) Port() int { return c.lc.port }

// SocketDir returns the folder of the cluster's unix socket
// (.s.PGSQL.<Port>), for connection strings like
// "host=<SocketDir> port=<Port> user=postgres".
func (c *Cluster) SocketDir() string { return c.lc.dir }

// Restart restarts the server with pg_ctl restart -m fast: every session
// is terminated (clients see "terminating connection due to administrator
// command" or a closed connection), transactions in progress roll back,
// committed data stays. It returns once the server accepts connections
// again and fails the test if it does not within a minute.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.lc.restart(); err != nil {
		t.Fatalf("skipjacktest: restart cluster: %v", err)
	}
	c.lc.requireReady(t, "restarted")
}

// Stop shuts the server down (pg_ctl stop -m fast) and returns once it has
// exited; its data stays, and Start brings it back on the same port.
// Clients see the server go away as with Restart, and then connection
// refused until Start. Stopping a stopped cluster does nothing.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.lc.pgCtlStop("fast"); err != nil {
		t.Fatalf("skipjacktest: stop cluster: %v", err)
	}
}

// Start starts a cluster that Stop stopped, on the same port, and returns
// once it accepts connections. Starting a running cluster does nothing.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lc.running() {
		return
	}
	if err := c.lc.start(); err != nil {
		t.Fatalf("skipjacktest: start cluster: %v", err)
	}
	c.lc.requireReady(t, "started")
}

// requireReady fails t unless the cluster, which pg_ctl just reported as
// started or restarted (what), accepts connections within a minute.
func (c *localCluster) requireReady(t testing.TB, what string) {
	t.Helper()
	if err := waitReady(c.url, time.Minute); err != nil {
		t.Fatalf("skipjacktest: cluster %s but does not accept connections: %v\n%s", what, err, c.logTail())
	}
}

// waitReady waits until a connection to u succeeds, for at most timeout.
// pg_ctl -w has already waited for the server to report itself ready;
// this confirms it from the client's side.
func waitReady(u string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ping(u)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ports handed to this process's clusters, so that two clusters started at
// once never probe the same one.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// reservePort returns a TCP port on 127.0.0.1 that was free a moment ago
// and that no other cluster of this process uses.
func reservePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports[port] {
			ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("the kernel kept handing out ports this process already uses")
}

func releasePort(port int) {
	portsMu.Lock()
	delete(ports, port)
	portsMu.Unlock()
}

// errPortTaken is returned by start when the server could not bind its port.
var errPortTaken = errors.New("port already in use")

// localCluster is a throwaway PostgreSQL cluster in a temporary folder: the
// shared one that ServerURL falls back to (unix socket only, port 0) and
// the ones of NewCluster (127.0.0.1:port and a unix socket).
type localCluster struct {
	dir      string // socket dir; data/ and log inside
	bin      string // folder of initdb, pg_ctl
	asUser   string // run initdb and pg_ctl as this user (when the process runs as root)
	port     int    // TCP port on 127.0.0.1, or 0 for the unix socket only
	url      string
	watchdog *exec.Cmd
	stopOnce sync.Once
}

// errNoBinaries is findBinDir's error: the server binaries are not installed.
var errNoBinaries = errors.New("initdb and pg_ctl are neither on PATH nor under /usr/lib/postgresql/*/bin")

// findBinDir returns a folder that holds initdb and pg_ctl: PATH first, then
// the newest /usr/lib/postgresql/*/bin.
func findBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errNoBinaries
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// startSharedCluster starts the cluster that ServerURL falls back to: unix
// socket only, stopped by Stop or by its watchdog.
func startSharedCluster() (*localCluster, error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c, err := newLocalCluster(bin)
	if err != nil {
		return nil, err
	}
	if err := c.start(); err != nil {
		c.stop()
		return nil, err
	}
	c.url = fmt.Sprintf("host=%s user=postgres dbname=postgres sslmode=disable", c.dir)
	return c, nil
}

// newLocalCluster creates a temporary folder, starts the watchdog that
// cleans it up after this process exits, and runs initdb in it. The server
// is not started yet.
func newLocalCluster(bin string) (*localCluster, error) {
	dir, err := os.MkdirTemp("", "skipjacktest-pg-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{dir: dir, bin: bin}
	// initdb refuses to run as root: run it and the server as "postgres".
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("running as root and there is no postgres user to run initdb as")
		}
		c.asUser = "postgres"
		if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	c.watchParent()
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	return c, nil
}

func (c *localCluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *localCluster) logPath() string { return filepath.Join(c.dir, "log") }
func (c *localCluster) pgCtl() string   { return filepath.Join(c.bin, "pg_ctl") }

// serverOptions are the postgres options pg_ctl passes with -o.
func (c *localCluster) serverOptions() string {
	opts := fmt.Sprintf("-k %s -c fsync=off -c max_connections=200", c.dir)
	if c.port == 0 {
		return opts + " -c listen_addresses=''"
	}
	return opts + fmt.Sprintf(" -c listen_addresses=127.0.0.1 -p %d", c.port)
}

// start starts the server and waits (pg_ctl -w) until it is ready. It
// returns an error matching errPortTaken when the port was in use.
func (c *localCluster) start() error {
	offset := c.logSize()
	out, err := c.command(c.pgCtl(), "-D", c.dataDir(), "-l", c.logPath(), "-o", c.serverOptions(), "-w", "start").CombinedOutput()
	if err != nil {
		log := c.logSince(offset)
		if strings.Contains(log, "Address already in use") {
			return fmt.Errorf("pg_ctl start on port %d: %w", c.port, errPortTaken)
		}
		return fmt.Errorf("pg_ctl start: %v: %s\nserver log:\n%s", err, out, log)
	}
	return nil
}

// restart runs pg_ctl restart -m fast and waits until the server is ready.
func (c *localCluster) restart() error {
	offset := c.logSize()
	out, err := c.command(c.pgCtl(), "-D", c.dataDir(), "-l", c.logPath(), "-o", c.serverOptions(), "-m", "fast", "-w", "restart").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %v: %s\nserver log:\n%s", err, out, c.logSince(offset))
	}
	return nil
}

// pgCtlStop stops the server in mode (fast or immediate) and waits for it
// to exit. A server that is not running is not an error.
func (c *localCluster) pgCtlStop(mode string) error {
	if !c.running() {
		return nil
	}
	out, err := c.command(c.pgCtl(), "-D", c.dataDir(), "-m", mode, "-w", "stop").CombinedOutput()
	if err != nil && c.running() {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// running reports whether the server is running (pg_ctl status exits 0).
func (c *localCluster) running() bool {
	return c.command(c.pgCtl(), "-D", c.dataDir(), "status").Run() == nil
}

func (c *localCluster) logSize() int64 {
	st, err := os.Stat(c.logPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the server log written after offset.
func (c *localCluster) logSince(offset int64) string {
	f, err := os.Open(c.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// logTail returns the last few kilobytes of the server log, for failure
// messages.
func (c *localCluster) logTail() string {
	const tail = 4 << 10
	return "server log (tail):\n" + c.logSince(max(0, c.logSize()-tail))
}

func (c *localCluster) command(name string, args ...string) *exec.Cmd {
	if c.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", c.asUser, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// watchParent starts a detached watchdog that stops the cluster and removes
// its folder once this process has exited, so a test binary that dies (or
// has no Main) leaves nothing behind. stop ends it.
func (c *localCluster) watchParent() {
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s; rm -rf %s",
		os.Getpid(), c.stopCommandLine(), c.dir)
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = detached()
	if cmd.Start() == nil {
		c.watchdog = cmd
		go func() { _ = cmd.Wait() }() // reap it whenever it ends
	}
}

func (c *localCluster) stopCommandLine() string {
	line := fmt.Sprintf("%s -D %s -m immediate stop >/dev/null 2>&1", c.pgCtl(), c.dataDir())
	if c.asUser != "" {
		line = "runuser -u " + c.asUser + " -- " + line
	}
	return line
}

// stop stops the server at once (immediate mode), removes the cluster's
// folder and ends its watchdog. It is safe to call more than once.
func (c *localCluster) stop() {
	c.stopOnce.Do(func() {
		_ = c.command(c.pgCtl(), "-D", c.dataDir(), "-m", "immediate", "stop").Run()
		_ = os.RemoveAll(c.dir)
		if c.watchdog != nil {
			_ = c.watchdog.Process.Kill()
		}
	})
}
