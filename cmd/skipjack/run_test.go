package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestParseArgs checks how each command splits its flags and positional
// arguments, flags before, between and after the arguments.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string // after the command's name
		command string
		want    options
		wantErr string
	}{
		{command: "jobs show", args: []string{"send_email", "12", "--json", "13"},
			want: options{file: "skipjack.yaml", queue: "send_email", ids: []int64{12, 13}, asJSON: true}},
		{command: "jobs list", args: []string{"--state", "failed", "send_email", "--limit=5", "--after", "40", "-f", "x.yaml"},
			want: options{file: "x.yaml", queue: "send_email", state: "failed", limit: 5, after: 40}},
		{command: "jobs retry", args: []string{"q", "--state", "failed"},
			want: options{file: "skipjack.yaml", queue: "q", state: "failed"}},
		{command: "jobs cancel", args: []string{"q", "7", "-1"}, wantErr: "flag provided but not defined: -1"},
		{command: "jobs cancel", args: []string{"q", "0"}, wantErr: `job ID "0" is not a positive integer`},
		{command: "jobs list", args: []string{"q", "--limit", "0"}, wantErr: "--limit 0 is not between 1 and 1000"},
		{command: "jobs list", args: []string{"q"}, want: options{file: "skipjack.yaml", queue: "q", limit: 100}},
		{command: "workflows show", args: []string{"12", "--json"},
			want: options{file: "skipjack.yaml", ids: []int64{12}, asJSON: true}},
		{command: "workflows show", args: []string{"12", "13"}, wantErr: `unexpected arguments ["13"]`},
		{command: "workflows show", args: []string{}, wantErr: "missing workflow ID"},
		{command: "workflows list", args: []string{"--name", "fulfil_order", "--state", "failed", "--limit", "5"},
			want: options{file: "skipjack.yaml", workflow: "fulfil_order", state: "failed", limit: 5}},
		{command: "workflows list", args: []string{"--state", "pending"}, wantErr: `--state "pending" is not one of running, completed, failed`},
		{command: "workflows list", args: []string{"x"}, wantErr: `unexpected arguments ["x"]`},
		{command: "generate", args: []string{"--allow-breaking", "-f", "a.yaml"},
			want: options{file: "a.yaml", allowBreaking: true}},
		{command: "check", args: []string{"extra"}, wantErr: `unexpected arguments ["extra"]`},
		{command: "ui", args: []string{"--allowed-host", "a.example, b.example:8443,", "--allowed-host=c.example"},
			want: options{file: "skipjack.yaml", listen: "127.0.0.1:8080", allowedHosts: hostList{"a.example", "b.example:8443", "c.example"}}},
		{command: "ui", args: []string{"--allowed-host", "https://a.example"}, wantErr: `want a host name with an optional port (jobs.example.com:8443), not the URL "https://a.example"`},
	}
	for _, tt := range tests {
		t.Run(tt.command+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			o, _, err := commandNamed(t, tt.command).parse(tt.args, &stderr)
			if tt.wantErr != "" {
				got := stderr.String()
				if err != nil {
					got += err.Error()
				}
				if !strings.Contains(got, tt.wantErr) {
					t.Fatalf("got error %q, want %q", got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v (%s)", err, stderr.String())
			}
			if o.file != tt.want.file || o.queue != tt.want.queue || !slices.Equal(o.ids, tt.want.ids) || o.state != tt.want.state ||
				o.after != tt.want.after || o.limit != tt.want.limit || o.asJSON != tt.want.asJSON || o.allowBreaking != tt.want.allowBreaking ||
				o.listen != tt.want.listen || !slices.Equal(o.allowedHosts, tt.want.allowedHosts) || o.workflow != tt.want.workflow {
				t.Errorf("parsed %+v, want %+v", o, tt.want)
			}
		})
	}
}

// TestRunExitStatus checks the exit status of command lines that fail
// before any file or database is touched.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want int
	}{
		{nil, exitUsage},
		{[]string{"help"}, exitOK},
		{[]string{"jobs"}, exitUsage},
		{[]string{"jobs", "list", "-h"}, exitOK},
		{[]string{"stats", "--json", "--database-url", "x", "extra"}, exitUsage},
		{[]string{"generate", "--database-url", "x"}, exitUsage},
		{[]string{"jobs", "show", "q", "1", "--state", "failed", "--database-url", "x"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			if got := run(tt.args, env{stdout: io.Discard, stderr: io.Discard}); got != tt.want {
				t.Errorf("exit status %d, want %d", got, tt.want)
			}
		})
	}
}

// TestPrintStats checks the stats table: names left-aligned in a column as
// wide as the longest, counts right-aligned under their headers, a paused
// queue's wait marked paused.
func TestPrintStats(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := printStats(env{stdout: &out}, []queueStats{
		{Queue: "send_email", Pending: 12, Scheduled: 3, Failed: 1, OldestPendingSeconds: 1.5},
		{Queue: "a", Completed: 1234567},
		{Queue: "p", Pending: 2, OldestPendingSeconds: 61, Paused: true},
		{Queue: "sync", Running: 2, Limits: "concurrency 50, per key (tenant_id) 2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"QUEUE         PENDING  SCHEDULED    RUNNING  COMPLETED     FAILED  OLDEST PENDING\n" +
		"send_email         12          3          0          0          1            1.5s\n" +
		"a                   0          0          0    1234567          0              0s\n" +
		"p (paused)          2          0          0          0          0     paused 1m1s\n" +
		"sync                0          0          2          0          0              0s\n" +
		"sync: concurrency 50, per key (tenant_id) 2\n"
	if out.String() != want {
		t.Errorf("printStats:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestWriteRecord checks how jobs show prints one job, with every field
// distinct so that no two can be swapped unseen (attempt 2 of 3).
func TestWriteRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var r skipjack.Record[json.RawMessage]
	err := json.Unmarshal([]byte(`{"id": 7, "state": "failed", "attempt": 2, "max_attempts": 3, "priority": 3,
		"run_at": "2026-01-02T03:04:05Z", "created_at": "2026-01-02T03:04:05Z", "finished_at": "2026-01-02T03:04:05Z",
		"worker": "host:1", "rescues": 1,
		"errors": [{"attempt": 2, "at": "2026-01-02T03:04:05Z", "error": "boom\nat line 2", "worker": "host:1"}],
		"payload": {"to": "a@example.com"}}`), &r)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeRecord(&b, "send_email", &r)
	ts := at.Format(time.RFC3339)
	want := "job 7 of send_email\n" +
		"  state        failed\n" +
		"  attempt      2 of 3\n" +
		"  priority     3\n" +
		"  run at       " + ts + "\n" +
		"  created at   " + ts + "\n" +
		"  finished at  " + ts + "\n" +
		"  worker       host:1\n" +
		"  rescues      1\n" +
		"  errors\n" +
		"    attempt 2 at " + ts + " on host:1: boom at line 2\n" +
		"  payload\n" +
		"    {\n      \"to\": \"a@example.com\"\n    }\n"
	if b.String() != want {
		t.Errorf("writeRecord:\n%s\nwant:\n%s", b.String(), want)
	}
}

func commandNamed(t *testing.T, name string) *command {
	t.Helper()
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	t.Fatalf("no command %q", name)
	return nil
}
