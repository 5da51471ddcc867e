package migrationtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestJobsCommand runs skipjack jobs list, show, retry and cancel, one
// after the other, on a queue with pending, scheduled and failed jobs, and
// checks each command's output, exit status and effect on the rows.
func TestJobsCommand(t *testing.T) {
	t.Parallel()
	p := newProject(t, twoQueues)
	p.generate()
	dbURL := skipjacktest.NewDatabase(t)
	p.ok("migrate", "--database-url", dbURL)
	conn := connect(t, dbURL)
	// Jobs 1 (due), 2 and 3 (failed once, with an error), 4 (scheduled).
	execSQL(t, conn, `INSERT INTO skipjack.send_email (payload, run_at) VALUES
		('{"to": "a"}', now()), ('{"to": "b"}', now()), ('{"to": "c"}', now()), ('{"to": "d"}', now() + interval '1 hour')`)
	execSQL(t, conn, `UPDATE skipjack.send_email SET state = 'failed', attempt = 1, finished_at = now(),
		errors = '[{"attempt": 1, "at": "2026-01-02T03:04:05Z", "error": "smtp down", "worker": "w1"}]' WHERE id IN (2, 3)`)

	env := []string{"DATABASE_URL=" + dbURL}
	type step struct {
		args       string
		code       int
		stdout     []string // substrings, in order
		stderr     string   // substring
		afterState string   // SQL: the states of jobs 1..4 afterwards, "state,state,..."
	}
	check := func(t *testing.T, s step) {
		t.Helper()
		r := p.in(t).skipjack(env, strings.Fields(s.args)...)
		if r.code != s.code {
			t.Fatalf("skipjack %s: exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", s.args, r.code, s.code, r.stdout, r.stderr)
		}
		rest := r.stdout
		for _, want := range s.stdout {
			i := strings.Index(rest, want)
			if i < 0 {
				t.Fatalf("skipjack %s: stdout lacks %q (in order):\n%s", s.args, want, r.stdout)
			}
			rest = rest[i+len(want):]
		}
		if !strings.Contains(r.stderr, s.stderr) {
			t.Errorf("skipjack %s: stderr %q, want it to contain %q", s.args, r.stderr, s.stderr)
		}
		if s.afterState != "" {
			if got := jobStates(t, conn); got != s.afterState {
				t.Errorf("after skipjack %s: jobs 1-4 are %s, want %s", s.args, got, s.afterState)
			}
		}
	}

	// Commands that change nothing run at once; each builds its program.
	reads := []step{
		{args: "jobs list send_email --state failed",
			stdout: []string{"ID", "STATE", "LAST ERROR", "\n2 ", "failed", "1/25", "smtp down", "\n3 ", "failed"}},
		{args: "jobs list send_email --limit 2",
			stdout: []string{"\n1 ", "pending", "\n2 ", "failed"}, stderr: "more jobs may follow: skipjack jobs list send_email --after 2"},
		{args: "jobs list resize_image", stdout: []string{"ID"}},
		{args: "jobs show send_email 2",
			stdout: []string{"job 2 of send_email", "state        failed", "attempt      1 of 25", "errors", "attempt 1 at 2026-01-02T03:04:05Z on w1: smtp down", "payload", `"to": "b"`}},
		{args: "jobs show send_email 2 99 --json", code: 1,
			stdout: []string{`"id": 2`, `"state": "failed"`}, stderr: "skipjack jobs show: send_email: no job with id 99"},
		{args: "jobs retry nosuch 1", code: 1, stderr: `unknown queue "nosuch"; skipjack.yaml declares send_email, resize_image`},
	}
	t.Run("read", func(t *testing.T) {
		for _, s := range reads {
			t.Run(s.args, func(t *testing.T) {
				t.Parallel()
				check(t, s)
			})
		}
	})
	if t.Failed() {
		return
	}

	// Commands that change jobs run in order, each on the previous result.
	for _, s := range []step{
		{args: "jobs retry send_email 2 1",
			stdout: []string{"send_email: retried 1 of 2 jobs (1 not failed or scheduled)"}, afterState: "pending,pending,failed,pending"},
		{args: "jobs retry send_email --state failed",
			stdout: []string{"send_email: retried 1 of 1 job in state failed"}, afterState: "pending,pending,pending,pending"},
		{args: "jobs cancel send_email 1 4",
			stdout: []string{"send_email: cancelled 2 of 2 jobs"}, afterState: "failed,pending,pending,failed"},
		// An id that names no job changes nothing, whatever the others name.
		{args: "jobs cancel send_email 2 77", code: 1,
			stderr: "skipjack jobs cancel: send_email: no job with id 77; nothing cancelled", afterState: "failed,pending,pending,failed"},
		{args: "jobs retry send_email 1 78 --json", code: 1,
			stdout: []string{`"queue": "send_email"`, `"changed": 0`, `"missing": [`, "78"}, stderr: "skipjack jobs retry: send_email: no job with id 78; nothing retried", afterState: "failed,pending,pending,failed"},
		{args: "jobs cancel send_email --state pending --json",
			stdout: []string{`"queue": "send_email"`, `"state": "pending"`, `"matched": 2`, `"changed": 2`, `"missing": []`}, afterState: "failed,failed,failed,failed"},
	} {
		check(t, s)
	}

	// --json lists every job with the runtime's Record fields.
	r := p.ok("jobs", "list", "send_email", "--json", "--database-url", dbURL)
	var records []struct {
		ID      int64  `json:"id"`
		State   string `json:"state"`
		Payload struct {
			To string `json:"to"`
		} `json:"payload"`
		Errors []struct {
			Error string `json:"error"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &records); err != nil {
		t.Fatalf("jobs list --json printed no JSON array (%v):\n%s", err, r.stdout)
	}
	if len(records) != 4 || records[0].ID != 1 || records[3].ID != 4 || records[1].Payload.To != "b" ||
		len(records[3].Errors) == 0 || records[3].Errors[len(records[3].Errors)-1].Error != "cancelled" {
		t.Errorf("jobs list --json: got %+v, want jobs 1-4 with their payloads, 4 cancelled", records)
	}
}

// jobStates returns the states of the send_email jobs in id order, comma
// separated.
func jobStates(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "SELECT state FROM skipjack.send_email ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(states, ",")
}
