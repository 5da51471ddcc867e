package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"

	"github.com/skipjack-dev/skipjack/dashboard/internal/dashtest"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/syncaccount"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// quiet is a logger for workers that the tests make fail on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testWorker is the WorkerID of the tests' workers; their jobs record it with the run's suffix ("<WorkerID>/<8 hex>").
const testWorker = "dashboard-test-worker"

// The helpers shared with the browser tests' module.
var (
	newDB     = dashtest.NewDB
	admins    = dashtest.Admins
	waitFor   = dashtest.WaitFor
	runWorker = dashtest.RunWorker
)

// workerConfig is a worker that polls often, so retries run soon.
var workerConfig = skipjack.WorkerConfig{Concurrency: 2, PollInterval: 50 * time.Millisecond, Logger: quiet, WorkerID: testWorker}

// seeded is a database with jobs in every state the pages show.
type seeded struct {
	pool      *pgxpool.Pool
	failed    int64   // send_email, failed after 2 attempts
	pending   []int64 // send_email, due
	scheduled int64   // send_email, in an hour
	completed int64   // resize_image, completed and retained
	ranked    int64   // resize_image, pending with priority 3
}

// seed fills a fresh database: a send_email job that a worker failed twice
// ("smtp: 550 mailbox unavailable"), two pending and one scheduled
// send_email jobs, one completed and one pending resize_image job.
func seed(t *testing.T) seeded {
	t.Helper()
	ctx := t.Context()
	s := seeded{pool: newDB(t)}
	var err error
	s.failed, err = sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "ada@example.com", Subject: "Your order", Tags: []string{"order", "eu"}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, sendemail.NewWorker(s.pool, func(context.Context, *sendemail.Job) error {
		return errors.New("smtp: 550 mailbox unavailable")
	}, workerConfig).Run)
	waitFor(t, "the send_email job has failed", func() (bool, error) {
		rec, err := sendemail.Get(ctx, s.pool, s.failed)
		return err == nil && rec.State == skipjack.StateFailed, err
	})
	stop()

	s.completed, err = resizeimage.Enqueue(ctx, s.pool, resizeimage.Payload{ImageID: 7, Width: 640})
	if err != nil {
		t.Fatal(err)
	}
	stop = runWorker(t, resizeimage.NewWorker(s.pool, func(context.Context, *resizeimage.Job) error { return nil }, workerConfig).Run)
	waitFor(t, "the resize_image job has completed", func() (bool, error) {
		rec, err := resizeimage.Get(ctx, s.pool, s.completed)
		return err == nil && rec.State == skipjack.StateCompleted, err
	})
	stop()

	for i := range 2 {
		id, err := sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "bob" + strconv.Itoa(i) + "@example.com", Subject: "Hello"})
		if err != nil {
			t.Fatal(err)
		}
		s.pending = append(s.pending, id)
	}
	if s.scheduled, err = sendemail.Enqueue(ctx, s.pool, sendemail.Payload{To: "cy@example.com"}, skipjack.Delay(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s.ranked, err = resizeimage.Enqueue(ctx, s.pool, resizeimage.Payload{ImageID: 8, Width: 320}, skipjack.Priority(3)); err != nil {
		t.Fatal(err)
	}
	return s
}

// overviewCell returns the text of an overview table cell.
func overviewCell(body, queue, col string) string {
	row := regexp.MustCompile(`(?s)<tr data-queue="` + regexp.QuoteMeta(queue) + `">(.*?)</tr>`).FindStringSubmatch(body)
	if row == nil {
		return "(no row)"
	}
	cell := regexp.MustCompile(`data-col="` + regexp.QuoteMeta(col) + `">(?:<a [^>]*>)?([^<]*)`).FindStringSubmatch(row[1])
	if cell == nil {
		return "(no cell)"
	}
	return cell[1]
}

// TestPostgresOverview checks every figure of the overview against jobs
// that real workers ran on a real database.
func TestPostgresOverview(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := New(Config{Queues: admins(s.pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	res, body := do(t, h, httptest.NewRequest("GET", "/", nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d:\n%s", res.StatusCode, body)
	}
	tests := []struct{ queue, col, want string }{
		{"send_email", "pending", "2"},
		{"send_email", "scheduled", "1"},
		{"send_email", "running", "0"},
		{"send_email", "completed", "0"},
		{"send_email", "failed", "1"},
		{"send_email", "completed-1h", "0"},
		{"send_email", "failed-1h", "1"},
		{"resize_image", "pending", "1"},
		{"resize_image", "completed", "1"},
		{"resize_image", "failed", "0"},
		{"resize_image", "completed-1h", "1"},
	}
	for _, tt := range tests {
		if got := overviewCell(body, tt.queue, tt.col); got != tt.want {
			t.Errorf("%s %s = %q, want %q", tt.queue, tt.col, got, tt.want)
		}
	}
	if got := overviewCell(body, "send_email", "oldest"); got == "–" || got == "(no cell)" {
		t.Errorf("send_email oldest pending = %q, want an age", got)
	}
}

// TestPostgresPages checks the queue and job pages over real records.
func TestPostgresPages(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := New(Config{Queues: admins(s.pool), Actions: true, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	job := func(q string, id int64) string { return "/queues/" + q + "/jobs/" + strconv.FormatInt(id, 10) }
	row := func(id int64) string { return `<tr data-job="` + strconv.FormatInt(id, 10) + `">` }
	tests := []struct {
		target  string
		status  int
		want    []string
		notWant []string
	}{
		{"/queues/send_email?state=failed", 200, []string{row(s.failed), "smtp: 550 mailbox unavailable", "2/2"}, []string{row(s.pending[0])}},
		{"/queues/send_email?state=pending", 200, []string{row(s.pending[0]), row(s.pending[1]), row(s.scheduled), "state-scheduled"}, []string{row(s.failed)}},
		{"/queues/send_email", 200, []string{row(s.failed), row(s.pending[1]), row(s.scheduled)}, nil},
		{"/queues/resize_image?state=completed", 200, []string{row(s.completed)}, []string{row(s.ranked)}},
		{"/queues/send_email?id=" + strconv.FormatInt(s.completed+1000, 10), 404, []string{"has no job"}, nil},
		{job("send_email", s.failed), 200, []string{
			`<span id="job-state" class="state state-failed">failed</span>`, "2 of 2",
			"smtp: 550 mailbox unavailable", "<code>" + testWorker + "/",
			// Pretty-printed (jsonb keeps its own key order).
			"{\n  &#34;", "\n  &#34;to&#34;: &#34;ada@example.com&#34;", "\n  &#34;tags&#34;: [\n    &#34;order&#34;,\n    &#34;eu&#34;\n  ]",
			"Enqueue to finish", "/retry\"",
		}, []string{"/cancel\""}},
		{job("send_email", s.scheduled), 200, []string{"state-scheduled", "Runs in", "/retry\"", "/cancel\""}, nil},
		{job("resize_image", s.ranked), 200, []string{"<dt>Priority</dt><dd>3</dd>", "No attempt of this job has failed."}, []string{"/retry\""}},
		{job("resize_image", s.failed+1000), 404, []string{"has no job"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			res, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d:\n%s", res.StatusCode, tt.status, body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("body has %q", w)
				}
			}
		})
	}
}

// confirmAndPost does what a browser does for an action: GET the
// confirmation page, then POST its form same-origin.
func confirmAndPost(t *testing.T, h http.Handler, target string) *http.Response {
	t.Helper()
	token := confirmToken(t, h, target)
	res, body := do(t, h, post(target, token, nil))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s: status %d:\n%s", target, res.StatusCode, body)
	}
	return res
}

// TestPostgresActions retries and cancels real jobs through the handler and
// reads the outcome back from the database.
func TestPostgresActions(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := New(Config{Queues: admins(s.pool), Actions: true, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      int64
		action  string
		state   string
		changed string
	}{
		{"retry failed", s.failed, "retry", skipjack.StatePending, "1"},
		{"retry scheduled", s.scheduled, "retry", skipjack.StatePending, "1"},
		{"cancel pending", s.pending[0], "cancel", skipjack.StateFailed, "1"},
		{"retry pending changes nothing", s.pending[1], "retry", skipjack.StatePending, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := "/queues/send_email/jobs/" + strconv.FormatInt(tt.id, 10) + "/" + tt.action
			res := confirmAndPost(t, h, target)
			if loc := res.Header.Get("Location"); !strings.HasSuffix(loc, "?done="+tt.action+"&changed="+tt.changed) {
				t.Errorf("Location %q, want changed=%s", loc, tt.changed)
			}
			rec, err := sendemail.Get(t.Context(), s.pool, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.State != tt.state {
				t.Errorf("job %d is %s, want %s", tt.id, rec.State, tt.state)
			}
			if tt.state == skipjack.StatePending && rec.RunAt.After(time.Now().Add(time.Minute)) {
				t.Errorf("job %d runs at %v, want now", tt.id, rec.RunAt)
			}
		})
	}
}

// countingAdmin records the ListParams of every List call of a queue.
type countingAdmin struct {
	skipjack.QueueAdmin
	mu    sync.Mutex
	lists []skipjack.ListParams
}

func (c *countingAdmin) List(ctx context.Context, p skipjack.ListParams) ([]*skipjack.Record[json.RawMessage], error) {
	c.mu.Lock()
	c.lists = append(c.lists, p)
	c.mu.Unlock()
	return c.QueueAdmin.List(ctx, p)
}

// TestPostgresKeysetPagination follows a queue's next-page links over
// real jobs, at the default page size and at the largest: every job appears
// exactly once, in id order, on the expected number of pages, and every
// List call stays within List's cap.
func TestPostgresKeysetPagination(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pageSize, jobs, pages int
	}{
		{50, 130, 3},
		{maxPageSize, 2*maxPageSize + 1, 3},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.pageSize), func(t *testing.T) {
			t.Parallel()
			pool := newDB(t)
			ps := make([]sendemail.Payload, tt.jobs)
			for i := range ps {
				ps[i] = sendemail.Payload{To: "x" + strconv.Itoa(i) + "@example.com"}
			}
			if n, err := sendemail.EnqueueMany(t.Context(), pool, ps); err != nil || n != int64(tt.jobs) {
				t.Fatalf("EnqueueMany: %d, %v", n, err)
			}
			counted := &countingAdmin{QueueAdmin: sendemail.Admin(pool)}
			h, err := New(Config{Queues: []skipjack.QueueAdmin{counted}, PageSize: tt.pageSize, AllowedHosts: testHosts})
			if err != nil {
				t.Fatal(err)
			}
			idRE := regexp.MustCompile(`<tr data-job="(\d+)">`)
			nextRE := regexp.MustCompile(`href="\.\./(queues/send_email\?[^"]*)" rel="next"`)
			var ids []int64
			target, pages := "/queues/send_email?state=pending", 0
			for target != "" && pages < 10 {
				pages++
				res, body := do(t, h, httptest.NewRequest("GET", target, nil))
				if res.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d", target, res.StatusCode)
				}
				for _, m := range idRE.FindAllStringSubmatch(body, -1) {
					id, _ := strconv.ParseInt(m[1], 10, 64)
					ids = append(ids, id)
				}
				target = ""
				if m := nextRE.FindStringSubmatch(body); m != nil {
					target = "/" + strings.ReplaceAll(m[1], "&amp;", "&")
				}
			}
			if pages != tt.pages || len(ids) != tt.jobs {
				t.Fatalf("%d pages with %d jobs, want %d pages with %d", pages, len(ids), tt.pages, tt.jobs)
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("ids out of order or repeated at %d: %v", i, ids[i-1:i+1])
				}
			}
			for _, p := range counted.lists {
				if p.Limit < 1 || p.Limit > 1000 {
					t.Errorf("List called with Limit %d", p.Limit)
				}
			}
		})
	}
}

// TestPostgresDashboardRoles sets up the read-only role as the package
// documentation says and checks that the dashboard reads every page with
// it and that an action fails in the database rather than changing a job;
// then it gives the role what the documentation says actions need, and
// retry and cancel work.
func TestPostgresDashboardRoles(t *testing.T) {
	t.Parallel()
	s := seed(t)
	ctx := t.Context()
	prefix, err := skipjacktest.Prefix()
	if err != nil {
		t.Fatal(err)
	}
	role := prefix + "dashboard_ro_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	exec := func(stmts ...string) {
		t.Helper()
		for _, stmt := range stmts {
			if _, err := s.pool.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
	}
	exec(
		`CREATE ROLE `+role+` LOGIN PASSWORD 'ro'`,
		`ALTER ROLE `+role+` SET default_transaction_read_only = on`,
		`GRANT USAGE ON SCHEMA skipjack TO `+role,
		`GRANT SELECT ON ALL TABLES IN SCHEMA skipjack TO `+role,
		`ALTER DEFAULT PRIVILEGES IN SCHEMA skipjack GRANT SELECT ON TABLES TO `+role,
	)
	var pools []*pgxpool.Pool
	t.Cleanup(func() {
		for _, p := range pools {
			p.Close()
		}
		bg := context.Background()
		for _, stmt := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := s.pool.Exec(bg, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	connectAsRole := func() *pgxpool.Pool {
		t.Helper()
		cfg, err := pgxpool.ParseConfig("")
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig = s.pool.Config().ConnConfig.Copy()
		cfg.ConnConfig.User, cfg.ConnConfig.Password = role, "ro"
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
		return p
	}

	h, err := New(Config{Queues: admins(connectAsRole()), Actions: true, Logger: quiet, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	failed := "/queues/send_email/jobs/" + strconv.FormatInt(s.failed, 10)
	for _, target := range []string{"/", "/?range=day", "/queues/send_email", "/queues/resize_image?state=completed", failed, failed + "/retry",
		"/queues/sync_account", "/queues/sync_account/failures", "/queues/sync_account?where=customer%3D42", "/queues/sync_account/pause"} {
		if res, body := do(t, h, httptest.NewRequest("GET", target, nil)); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s as the read-only role: %d:\n%s", target, res.StatusCode, body)
		}
	}
	token := confirmToken(t, h, failed+"/retry")
	res, body := do(t, h, post(failed+"/retry", token, nil))
	if res.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "read-only") && !strings.Contains(body, "permission denied") {
		t.Errorf("retry as the read-only role: %d:\n%s", res.StatusCode, body)
	}
	if rec, err := sendemail.Get(ctx, s.pool, s.failed); err != nil || rec.State != skipjack.StateFailed {
		t.Fatalf("after a refused retry the job is %+v (%v), want failed", rec, err)
	}

	// What actions need: UPDATE, and read-write transactions.
	exec(
		`ALTER ROLE `+role+` SET default_transaction_read_only = off`,
		`GRANT UPDATE ON ALL TABLES IN SCHEMA skipjack TO `+role,
	)
	h, err = New(Config{Queues: admins(connectAsRole()), Actions: true, Logger: quiet, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	confirmAndPost(t, h, failed+"/retry")
	confirmAndPost(t, h, "/queues/send_email/jobs/"+strconv.FormatInt(s.pending[0], 10)+"/cancel")
	for id, want := range map[int64]string{s.failed: skipjack.StatePending, s.pending[0]: skipjack.StateFailed} {
		if rec, err := sendemail.Get(ctx, s.pool, id); err != nil || rec.State != want {
			t.Errorf("job %d as the actions role: %+v (%v), want %s", id, rec, err, want)
		}
	}

	// Pausing inserts the queue's row in the queues table the first time:
	// UPDATE alone does not do.
	if res, body := do(t, h, post("/queues/sync_account/pause", confirmToken(t, h, "/queues/sync_account/pause"), nil)); res.StatusCode != http.StatusInternalServerError || !strings.Contains(body, "permission denied") {
		t.Errorf("pause without INSERT on the queues table: %d:\n%s", res.StatusCode, body)
	}
	exec(`GRANT INSERT ON skipjack._skipjack_queues TO ` + role)
	confirmAndPost(t, h, "/queues/sync_account/pause")
	if st, err := syncaccount.Stats(ctx, s.pool); err != nil || !st.Paused {
		t.Errorf("after pausing as the actions role: %+v (%v), want paused", st, err)
	}
}

// TestPostgresBulkRetry retries a failed and a scheduled job in one
// confirmed action, as a queue page's bulk link does, and cancels two
// pending ones.
func TestPostgresBulkRetry(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := New(Config{Queues: admins(s.pool), Actions: true, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		action string
		ids    []int64
		state  string
	}{
		{"retry", []int64{s.failed, s.scheduled}, skipjack.StatePending},
		{"cancel", s.pending, skipjack.StateFailed},
	}
	for _, tt := range tests {
		ids := idsText(tt.ids)
		token := confirmToken(t, h, "/queues/send_email/"+tt.action+"?ids="+ids)
		res, body := do(t, h, postForm("/queues/send_email/"+tt.action, map[string][]string{"ids": {ids}, "token": {token}}))
		if want := "changed=2&done=" + tt.action + "&of=2"; res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), want) {
			t.Fatalf("POST %s %s: %d Location %q, want 303 ending in %q:\n%s", tt.action, ids, res.StatusCode, res.Header.Get("Location"), want, body)
		}
		for _, id := range tt.ids {
			if rec, err := sendemail.Get(t.Context(), s.pool, id); err != nil || rec.State != tt.state {
				t.Errorf("after %s job %d is %+v (%v), want %s", tt.action, id, rec, err, tt.state)
			}
		}
	}
}
