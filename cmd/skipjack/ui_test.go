package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// TestUIServesDashboard runs skipjack ui end to end on a module that
// requires the dashboard: it migrates a fresh database with skipjack
// migrate, enqueues a job with plain SQL, starts ui on a free port, reads
// the job's count from the dashboard's overview, and stops ui with its
// context, which must end it cleanly.
func TestUIServesDashboard(t *testing.T) {
	t.Parallel()
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "go.mod"), `module example.com/uiapp

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/skipjack-dev/skipjack/dashboard v0.0.0
	github.com/skipjack-dev/skipjack/runtime v0.0.0
)

replace github.com/skipjack-dev/skipjack/runtime => `+abs("../../runtime")+`

replace github.com/skipjack-dev/skipjack/dashboard => `+abs("../../dashboard")+"\n")
	yaml := filepath.Join(dir, "skipjack.yaml")
	writeTestFile(t, yaml, `version: 1
name: uiapp
out: ./internal/jobs
queues:
  send_email:
    payload: {to: string}
  resize_image:
    payload: {width: int}
`)
	cfg, err := config.Load(yaml)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := env{stdout: io.Discard, stderr: io.Discard, sqlc: generator.SQLCRunner(exe)}
	out, err := generator.Generate(cfg, generator.Options{SQLC: e.sqlc})
	if err != nil {
		t.Fatalf("generate: %v", err)
	}
	if _, err := generator.Write(dir, out); err != nil {
		t.Fatal(err)
	}
	// The service mounts the dashboard itself, so its module keeps the
	// requirement through go mod tidy.
	writeTestFile(t, filepath.Join(dir, "internal", "ops", "ops.go"), `// Package ops mounts the dashboard.
package ops

import _ "github.com/skipjack-dev/skipjack/dashboard"
`)
	goTool(t, dir, "mod", "tidy")

	dbURL := newTestDatabase(t)
	var stderr strings.Builder
	e.stderr = &stderr
	if err := migrate(options{file: yaml, dbURL: dbURL}, e); err != nil {
		t.Fatalf("migrate: %v\n%s", err, stderr.String())
	}

	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO skipjack.send_email (payload) VALUES ('{"to": "a@example.com"}')`); err != nil {
		t.Fatal(err)
	}

	pr, pw := io.Pipe()
	e.stdout = pw
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serveUI(ctx, options{file: yaml, dbURL: dbURL, listen: "127.0.0.1:0"}, e)
		pw.Close()
	}()
	t.Cleanup(cancel)
	// The program's first line says where it listens.
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatalf("ui printed nothing and returned %v; stderr:\n%s", <-done, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`serving 2 queue\(s\) of uiapp on (http://127\.0\.0\.1:\d+/) \(read-only\)`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("ui's first line %q does not say where it serves", lines.Text())
	}
	res, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", m[1], res.StatusCode, body)
	}
	for _, want := range []string{`<tr data-queue="resize_image">`, `aria-label="send_email: 1 pending">1</a>`, "read-only"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ui after its context ended: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ui did not stop within 30s of its context ending")
	}
}

// newTestDatabase creates a fresh database on the server the other tests
// use ($DATABASE_URL, else 127.0.0.1:5432 as postgres), dropped when the
// test ends. Without a reachable server it skips the test.
func newTestDatabase(t *testing.T) string {
	t.Helper()
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		server = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Skipf("no PostgreSQL server at %s: %v", server, err)
	}
	defer admin.Close(context.Background())
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "skipjack_ui_" + hex.EncodeToString(suffix[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(fmt.Errorf("parse %s: %w", server, err))
	}
	u.Path = "/" + name
	return u.String()
}
