package migrationtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// The two configs of TestQueuesOnSeparateClusters, laid out as
// docs/deploying.md ("Queues on separate clusters") recommends: one
// skipjack.yaml per cluster, each with its own name, out and migrations
// dir. Both keep the default schema, so only their names keep their
// migration histories apart. Completed jobs are retained, so the tables
// show where each job completed.
const (
	coreConfig = `version: 1
name: core
out: .
migrations: {dir: ./migrations}
queues:
  send_email:
    payload: {to: string}
    retention: {completed: 1h}
`
	mediaConfig = `version: 1
name: media
out: .
migrations: {dir: ./migrations}
queues:
  resize_image:
    payload: {image_id: int64}
    retention: {completed: 1h}
`
)

// clustersJobs is how many jobs the program enqueues into each queue.
const clustersJobs = 200

// clustersMain is a program of the generated project: it connects one pool
// to each cluster, runs each config's generated Migrate (a no-op after
// skipjack migrate), enqueues clustersJobs jobs into each queue on its own
// pool, runs both workers in this one process until each queue's Stats,
// read on its own pool, shows every job completed, then stops them and
// prints what ran as JSON. Every step is bounded by one 40s deadline.
const clustersMain = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"example.com/migrationtest/internal/jobs/core"
	"example.com/migrationtest/internal/jobs/core/sendemail"
	"example.com/migrationtest/internal/jobs/media"
	"example.com/migrationtest/internal/jobs/media/resizeimage"
)

const jobs = JOBS

type summary struct {
	Sent, Resized, BadPayloads int64
	CoreCompleted, MediaCompleted int64
}

func main() {
	s, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "work:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(s)
}

func run() (summary, error) {
	var s summary
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	corePool, err := pgxpool.New(ctx, os.Getenv("CORE_DATABASE_URL"))
	if err != nil {
		return s, err
	}
	defer corePool.Close()
	mediaPool, err := pgxpool.New(ctx, os.Getenv("MEDIA_DATABASE_URL"))
	if err != nil {
		return s, err
	}
	defer mediaPool.Close()
	if err := core.Migrate(ctx, corePool); err != nil {
		return s, err
	}
	if err := media.Migrate(ctx, mediaPool); err != nil {
		return s, err
	}

	emails := make([]sendemail.Payload, jobs)
	images := make([]resizeimage.Payload, jobs)
	for i := range jobs {
		emails[i] = sendemail.Payload{To: fmt.Sprintf("user%d@example.com", i)}
		images[i] = resizeimage.Payload{ImageID: int64(i)}
	}
	if n, err := sendemail.EnqueueMany(ctx, corePool, emails); err != nil || n != jobs {
		return s, fmt.Errorf("enqueue send_email: %d, %v", n, err)
	}
	if n, err := resizeimage.EnqueueMany(ctx, mediaPool, images); err != nil || n != jobs {
		return s, fmt.Errorf("enqueue resize_image: %d, %v", n, err)
	}

	var sent, resized, bad atomic.Int64
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := skipjack.WorkerConfig{Concurrency: 4, Logger: logger}
	workers := []interface{ Run(context.Context) error }{
		sendemail.NewWorker(corePool, func(ctx context.Context, job *sendemail.Job) error {
			if job.Payload.To == "" {
				bad.Add(1)
			}
			sent.Add(1)
			return nil
		}, cfg),
		resizeimage.NewWorker(mediaPool, func(ctx context.Context, job *resizeimage.Job) error {
			if job.Payload.ImageID < 0 || job.Payload.ImageID >= jobs {
				bad.Add(1)
			}
			resized.Add(1)
			return nil
		}, cfg),
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(workers))
	for _, w := range workers {
		go func() { errs <- w.Run(wctx) }()
	}

	for {
		cs, err := sendemail.Stats(ctx, corePool)
		if err != nil {
			return s, err
		}
		ms, err := resizeimage.Stats(ctx, mediaPool)
		if err != nil {
			return s, err
		}
		s.CoreCompleted, s.MediaCompleted = cs.Completed, ms.Completed
		if cs.Completed == jobs && ms.Completed == jobs {
			break
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("not done in time: %+v %+v", cs, ms)
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	for range workers {
		if err := <-errs; err != nil {
			return s, fmt.Errorf("Run: %w", err)
		}
	}
	s.Sent, s.Resized, s.BadPayloads = sent.Load(), resized.Load(), bad.Load()
	return s, nil
}
`

// TestQueuesOnSeparateClusters follows docs/deploying.md's "Queues on
// separate clusters" end to end: two configs (core with send_email, media
// with resize_image) in one Go module, generated with skipjack generate -f,
// and two PostgreSQL servers: a fresh database on the shared test server
// for core and a cluster of the test's own (skipjacktest.NewCluster) for
// media. It checks that
//
//   - skipjack migrate -f <config> --database-url <url> applies each
//     config's migrations to its own cluster only: send_email exists on
//     core's server and not on media's, resize_image the other way round,
//     and each server's migration history records only its own config;
//   - one process (a program in the generated project) enqueues into each
//     queue on its own pool and runs both workers at once: each handler runs
//     once per job, and every job ends completed in its own cluster's table
//     (and no row of either queue exists anywhere else).
func TestQueuesOnSeparateClusters(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	media := skipjacktest.NewCluster(t) // first: it skips the test if the server binaries are missing
	coreURL, mediaURL := skipjacktest.NewDatabase(t), media.URL()

	// newProject writes a root skipjack.yaml; this project has one config
	// per cluster instead.
	p := newProject(t, "")
	if err := os.Remove(filepath.Join(p.dir, "skipjack.yaml")); err != nil {
		t.Fatal(err)
	}
	coreFile, mediaFile := "internal/jobs/core/skipjack.yaml", "internal/jobs/media/skipjack.yaml"
	p.write(coreFile, coreConfig)
	p.write(mediaFile, mediaConfig)
	p.write("cmd/work/main.go", strings.Replace(clustersMain, "JOBS", fmt.Sprint(clustersJobs), 1))
	p.ok("generate", "-f", coreFile)
	p.ok("generate", "-f", mediaFile)
	for _, f := range []string{
		"internal/jobs/core/migrations/0001_skipjack_init.up.sql",
		"internal/jobs/core/sendemail/queue.go",
		"internal/jobs/media/migrations/0001_skipjack_init.up.sql",
		"internal/jobs/media/resizeimage/queue.go",
	} {
		if _, err := os.Stat(filepath.Join(p.dir, f)); err != nil {
			t.Fatalf("generate did not write %s: %v", f, err)
		}
	}
	goCommand(t, p.dir, nil, "mod", "tidy")
	t.Logf("project generated after %v", time.Since(begin).Round(time.Millisecond))

	// Both at once, as two deploy steps might run; each builds and runs its
	// own config's migrate program.
	migrations := []struct {
		config, url, name string
		r                 result
	}{{config: coreFile, url: coreURL, name: "core"}, {config: mediaFile, url: mediaURL, name: "media"}}
	var wg sync.WaitGroup
	for i := range migrations {
		m := &migrations[i]
		wg.Go(func() { m.r = p.skipjack(nil, "migrate", "-f", m.config, "--database-url", m.url) })
	}
	wg.Wait()
	for _, m := range migrations {
		if m.r.code != 0 || !strings.Contains(m.r.stdout, "skipjack migrate: 1 migration applied to "+m.name+" ") {
			t.Fatalf("migrate -f %s: exit status %d, stdout %q, stderr %q; want 0 and \"skipjack migrate: 1 migration applied to %s ...\"",
				m.config, m.r.code, m.r.stdout, m.r.stderr, m.name)
		}
	}
	t.Logf("both configs migrated after %v", time.Since(begin).Round(time.Millisecond))

	coreConn, mediaConn := connect(t, coreURL), connect(t, mediaURL)
	servers := []struct {
		name        string
		conn        *pgx.Conn
		own, others string
	}{
		{"core", coreConn, "send_email", "resize_image"},
		{"media", mediaConn, "resize_image", "send_email"},
	}
	for _, s := range servers {
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", "skipjack."+s.own); n != 1 {
			t.Errorf("after migrate, %s's table skipjack.%s does not exist on its server", s.name, s.own)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", "skipjack."+s.others); n != 0 {
			t.Errorf("after migrate, skipjack.%s exists on %s's server too, want it only on the other cluster", s.others, s.name)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM skipjack._skipjack_migrations WHERE config <> $1", s.name); n != 0 {
			t.Errorf("%s's server records %d migrations of another config, want only %s's", s.name, n, s.name)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM skipjack._skipjack_migrations WHERE config = $1", s.name); n == 0 {
			t.Errorf("%s's server records no migration of config %s", s.name, s.name)
		}
	}

	out := goCommand(t, p.dir, []string{"CORE_DATABASE_URL=" + coreURL, "MEDIA_DATABASE_URL=" + mediaURL}, "run", "./cmd/work")
	var got struct {
		Sent, Resized, BadPayloads    int64
		CoreCompleted, MediaCompleted int64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the program printed no summary (%v):\n%s", err, out)
	}
	t.Logf("program: %+v; whole test %v", got, time.Since(begin).Round(time.Millisecond))
	if got.Sent != clustersJobs || got.Resized != clustersJobs || got.BadPayloads != 0 {
		t.Errorf("handlers ran %d send_email and %d resize_image jobs (%d with a wrong payload), want %d each, all well-formed",
			got.Sent, got.Resized, got.BadPayloads, clustersJobs)
	}
	for _, s := range servers {
		if n := queryInt(t, s.conn, "SELECT count(*) FILTER (WHERE state = 'completed') FROM skipjack."+s.own); n != clustersJobs {
			t.Errorf("%s's server has %d completed %s jobs, want %d", s.name, n, s.own, clustersJobs)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FILTER (WHERE state <> 'completed') FROM skipjack."+s.own); n != 0 {
			t.Errorf("%s's server has %d %s jobs that are not completed, want 0", s.name, n, s.own)
		}
		if n := queryInt(t, s.conn, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", "skipjack."+s.others); n != 0 {
			t.Errorf("after the run, skipjack.%s exists on %s's server", s.others, s.name)
		}
	}
}

// goCommand runs the go command in dir with projectEnv(env...), fails the
// test unless it succeeds, and returns its standard output.
func goCommand(t *testing.T, dir string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = projectEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}
