package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// benchSchemas counts the schemas skipjack bench creates that are left in
// the database at dbURL.
func benchSchemas(t *testing.T, dbURL string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'skipjack\_bench\_%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBench runs skipjack bench against a real database: it prints the
// burn-down's jobs/s and the latency run's percentiles, and leaves no
// schema behind, whether it finishes, is interrupted once its queue exists,
// or is refused bad sizes. Kills bench-keeps-schema.
func TestBench(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      benchOptions
		interrupt bool   // cancel the context once the queue exists
		wantErr   string // "" for success
		wantOut   []string
	}{
		{
			name: "runs", opts: benchOptions{jobs: 300, latencyJobs: 20, concurrency: 10},
			wantOut: []string{
				`(?m)^skipjack bench: throwaway queue skipjack_bench_[0-9a-f]{8}\.probe`,
				`(?m)^enqueue: +300 jobs with EnqueueMany .*: \d+ jobs/s$`,
				`(?m)^burn-down: 300 jobs in \S+: \d+ jobs/s \(Concurrency 10`,
				`(?m)^latency: +20 jobs enqueued one at a time: pickup p50 \S+, p99 \S+, max \S+$`,
				`(?m)^dropped schema skipjack_bench_[0-9a-f]{8}$`,
			},
		},
		{
			name: "interrupted", opts: benchOptions{jobs: 300, latencyJobs: 20, concurrency: 10}, interrupt: true,
			wantErr: "context canceled",
			wantOut: []string{`(?m)^dropped schema skipjack_bench_[0-9a-f]{8}$`},
		},
		{
			name: "bad sizes", opts: benchOptions{jobs: 0, latencyJobs: 20, concurrency: 10},
			wantErr: "--jobs, --latency-jobs and --concurrency must be at least 1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL := skipjacktest.NewDatabase(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var ready func(string)
			if tc.interrupt {
				ready = func(string) { cancel() }
			}
			var stdout, stderr bytes.Buffer
			err := runBench(ctx, dbURL, tc.opts, env{stdout: &stdout, stderr: &stderr}, ready)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("bench: %v\n%s%s", err, stdout.String(), stderr.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("bench = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.interrupt && !errors.Is(err, context.Canceled) {
				t.Errorf("interrupted bench = %v, want context.Canceled", err)
			}
			for _, re := range tc.wantOut {
				if !regexp.MustCompile(re).MatchString(stdout.String()) {
					t.Errorf("output lacks %s:\n%s", re, stdout.String())
				}
			}
			if n := benchSchemas(t, dbURL); n != 0 {
				t.Errorf("%d throwaway schemas left behind", n)
			}
		})
	}
}
