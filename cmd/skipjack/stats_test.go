package main

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestStatsPausedNotLate pauses one queue whose oldest due job has waited
// 90 s beside another queue with the same wait: stats --json reports both
// waits, but only the running queue as late (late_seconds), and the table
// marks the paused queue's wait as paused.
func TestStatsPausedNotLate(t *testing.T) {
	t.Parallel()
	yaml := opsProject(t)
	dbURL := shopDatabase(t, yaml)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(t.Context(), `
UPDATE shop_jobs.send_email SET run_at = now() - interval '90 seconds';
INSERT INTO shop_jobs.resize_image (payload, run_at) VALUES ('{"image_id": 8}', now() - interval '90 seconds');`)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run([]string{"queues", "pause", "send_email", "-f", yaml, "--database-url", dbURL}, env{stdout: &out, stderr: io.Discard}); code != exitOK {
		t.Fatalf("queues pause: exit %d: %s", code, out.String())
	}
	out.Reset()
	if err := stats(options{file: yaml, dbURL: dbURL, asJSON: true}, env{stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	var rows []queueStats
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out.String())
	}
	byName := map[string]queueStats{}
	for _, r := range rows {
		byName[r.Queue] = r
	}
	tests := []struct {
		queue      string
		paused     bool
		late       bool
		oldestOver float64
	}{
		{"send_email", true, false, 90},
		{"resize_image", false, true, 90},
	}
	for _, tt := range tests {
		r, ok := byName[tt.queue]
		if !ok {
			t.Fatalf("stats --json lacks %s:\n%s", tt.queue, out.String())
		}
		if r.Paused != tt.paused || r.OldestPendingSeconds < tt.oldestOver {
			t.Errorf("%s: paused %v, oldest_pending_seconds %v; want paused %v and at least %v", tt.queue, r.Paused, r.OldestPendingSeconds, tt.paused, tt.oldestOver)
		}
		if tt.late && r.LateSeconds != r.OldestPendingSeconds {
			t.Errorf("%s runs: late_seconds %v, want its oldest pending wait %v", tt.queue, r.LateSeconds, r.OldestPendingSeconds)
		}
		if !tt.late && r.LateSeconds != 0 {
			t.Errorf("%s is paused: late_seconds %v, want 0 (its jobs wait on purpose)", tt.queue, r.LateSeconds)
		}
	}
	out.Reset()
	if err := stats(options{file: yaml, dbURL: dbURL}, env{stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`(?m)^send_email \(paused\) .* paused 1m3\d`, `(?m)^resize_image +(\d+ +){5} +1m3\d`} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("stats table does not match %s:\n%s", want, out.String())
		}
	}
}
