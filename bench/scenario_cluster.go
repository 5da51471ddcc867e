package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// ownCluster is a throwaway PostgreSQL cluster the scenario runner starts
// for itself (-own-cluster): the postgres-restart phase restarts the
// server and pool-exhaustion takes every free connection slot, which must
// never happen to a server that others share.
type ownCluster struct {
	dir    string // socket folder; data/ and server.log inside
	bin    string // folder of initdb and pg_ctl
	asUser string // the OS user to run them as when this process is root
	port   int
	opts   string // extra server options (-pg-opts)
}

// startOwnCluster initdb's a cluster in a temporary folder and starts it
// on 127.0.0.1 on a free port.
func startOwnCluster(bin, opts string) (*ownCluster, error) {
	dir, err := os.MkdirTemp("", "skjadversity-pg-")
	if err != nil {
		return nil, err
	}
	c := &ownCluster{dir: dir, bin: bin, opts: opts}
	if os.Geteuid() == 0 {
		// initdb and the server refuse to run as root.
		if _, err := user.Lookup("postgres"); err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("running as root and there is no postgres user to run the server as")
		}
		c.asUser = "postgres"
		if out, err := exec.Command("chown", "-R", "postgres", dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %v: %s", dir, err, out)
		}
	}
	if out, err := c.command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if out, err := c.command(c.pgCtl(), "-D", c.dataDir(), "-l", c.logPath(), "-o", c.serverOptions(), "-w", "start").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	if err := c.waitReady(time.Minute); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// url returns the URL of the cluster's maintenance database.
func (c *ownCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *ownCluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *ownCluster) logPath() string { return filepath.Join(c.dir, "server.log") }
func (c *ownCluster) pgCtl() string   { return filepath.Join(c.bin, "pg_ctl") }

// serverOptions are PostgreSQL's defaults (autovacuum on, as in
// production) except fsync, which is off because the machine's disk is
// shared with other work, pg_stat_statements, preloaded for the claim
// statements' buffers per phase, and what -pg-opts adds.
func (c *ownCluster) serverOptions() string {
	return fmt.Sprintf("-k %s -c listen_addresses=127.0.0.1 -p %d -c fsync=off -c shared_preload_libraries=pg_stat_statements %s", c.dir, c.port, c.opts)
}

// restart restarts the server in fast mode (every session is terminated,
// transactions in progress roll back) and waits until it accepts
// connections again.
func (c *ownCluster) restart() error {
	if out, err := c.command(c.pgCtl(), "-D", c.dataDir(), "-l", c.logPath(), "-o", c.serverOptions(), "-m", "fast", "-w", "restart").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl restart: %v: %s", err, out)
	}
	return c.waitReady(time.Minute)
}

// stop stops the server at once and removes the cluster's folder.
func (c *ownCluster) stop() {
	_ = c.command(c.pgCtl(), "-D", c.dataDir(), "-m", "immediate", "-w", "stop").Run()
	_ = os.RemoveAll(c.dir)
}

func (c *ownCluster) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, c.url())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster does not accept connections: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *ownCluster) command(name string, args ...string) *exec.Cmd {
	if c.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", c.asUser, "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// findPGBin returns the folder of initdb and pg_ctl: dir when given, else
// PATH, else /usr/lib/postgresql/15/bin.
func findPGBin(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	const debian = "/usr/lib/postgresql/15/bin"
	if _, err := os.Stat(filepath.Join(debian, "pg_ctl")); err == nil {
		return debian, nil
	}
	return "", errors.New("pg_ctl is neither on PATH nor in /usr/lib/postgresql/15/bin; pass -pg-bin")
}
