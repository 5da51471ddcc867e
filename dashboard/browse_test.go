package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// enqueueSubjects enqueues one send_email job per subject, in order, and
// returns their ids.
func enqueueSubjects(t *testing.T, pool *pgxpool.Pool, subjects ...string) []int64 {
	t.Helper()
	ids := make([]int64, len(subjects))
	for i, s := range subjects {
		id, err := sendemail.Enqueue(t.Context(), pool, sendemail.Payload{To: "x@example.com", Subject: s})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

var (
	jobRowRE = regexp.MustCompile(`<tr data-job="(\d+)">`)
	olderRE  = regexp.MustCompile(`href="\.\./(queues/send_email\?[^"]*)" rel="next" id="page-older"`)
	newerRE  = regexp.MustCompile(`href="\.\./(queues/send_email\?[^"]*)" rel="prev" id="page-newer"`)
)

// getPage GETs a queue page and returns its job ids in page order and its
// Older and Newer links (as request targets, "" when absent).
func getPage(t *testing.T, h http.Handler, target string) (ids []int64, older, newer string) {
	t.Helper()
	res, body := do(t, h, httptest.NewRequest("GET", target, nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", target, res.StatusCode, body)
	}
	for _, m := range jobRowRE.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		ids = append(ids, id)
	}
	link := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(body); m != nil {
			return "/" + strings.ReplaceAll(m[1], "&amp;", "&")
		}
		return ""
	}
	return ids, link(olderRE), link(newerRE)
}

// TestPostgresNewestFirstPaging pages a queue of 130 jobs, 50 a page,
// from the newest page to the oldest with the Older links and back with
// the Newer links, unfiltered and under a payload filter (which every
// link keeps): the first page holds the newest jobs, ids fall strictly
// down the pages, every job appears exactly once each way, and going back
// shows the same pages as going forth.
func TestPostgresNewestFirstPaging(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	subjects := make([]string, 130)
	for i := range subjects {
		subjects[i] = "s" + strconv.Itoa(i%2)
	}
	all := enqueueSubjects(t, pool, subjects...)
	h, err := New(Config{Queues: admins(pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, first string
		want        []int64 // ascending
		pages       int
	}{
		{"all", "/queues/send_email", all, 3},
		{"pending", "/queues/send_email?state=pending", all, 3},
		{"filtered", "/queues/send_email?where=subject%3Ds1", evens(all, 1), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var forth [][]int64
			target := tt.first
			for target != "" && len(forth) < 10 {
				ids, older, newer := getPage(t, h, target)
				if (len(forth) == 0) != (newer == "") {
					t.Errorf("page %d: Newer link %q", len(forth)+1, newer)
				}
				if tt.name == "filtered" && older != "" && !strings.Contains(older, "where=subject%3Ds1") {
					t.Errorf("Older link %q drops the filter", older)
				}
				forth = append(forth, ids)
				if older == "" {
					// Back from the oldest page.
					var back [][]int64
					back = append(back, ids)
					for newer != "" && len(back) < 10 {
						if tt.name == "filtered" && !strings.Contains(newer, "where=subject%3Ds1") {
							t.Errorf("Newer link %q drops the filter", newer)
						}
						ids, _, newer = getPage(t, h, newer)
						back = append(back, ids)
					}
					slices.Reverse(back)
					if !slices.EqualFunc(back, forth, slices.Equal) {
						t.Errorf("pages going back differ from going forth:\nback  %v\nforth %v", back, forth)
					}
				}
				target = older
			}
			if len(forth) != tt.pages {
				t.Fatalf("%d pages, want %d", len(forth), tt.pages)
			}
			got := slices.Concat(forth...)
			want := slices.Clone(tt.want)
			slices.Reverse(want)
			if !slices.Equal(got, want) {
				t.Fatalf("jobs newest first over the pages:\n%v\nwant\n%v", got, want)
			}
			if len(forth[0]) != 50 {
				t.Errorf("first page has %d jobs, want 50", len(forth[0]))
			}
		})
	}
}

// evens returns the ids at odd (parity 1) or even (0) positions.
func evens(ids []int64, parity int) []int64 {
	var out []int64
	for i, id := range ids {
		if i%2 == parity {
			out = append(out, id)
		}
	}
	return out
}

// TestPostgresFilteredTabCounts checks that under a payload filter the
// state tabs count the jobs the filter selects, and without one the
// queue's jobs.
func TestPostgresFilteredTabCounts(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ids := enqueueSubjects(t, pool, "a", "a", "a", "b", "b", "a")
	if _, err := sendemail.Cancel(t.Context(), pool, ids[0], ids[3]); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Queues: admins(pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		want   map[string]string // tab label: count
	}{
		{"/queues/send_email", map[string]string{"All": "6", "Pending": "4", "Failed": "2", "Running": "0"}},
		{"/queues/send_email?where=subject%3Da", map[string]string{"All": "4", "Pending": "3", "Failed": "1", "Running": "0"}},
		{"/queues/send_email?state=failed&where=subject%3Db", map[string]string{"All": "2", "Pending": "1", "Failed": "1"}},
		{"/queues/send_email?where=subject%3Dnone", map[string]string{"All": "0", "Pending": "0", "Failed": "0"}},
	}
	tabRE := regexp.MustCompile(`<li><a href="([^"]*)"[^>]*>(\w+) <span class="count">(\d+\+?)</span></a></li>`)
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			res, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			got := map[string]string{}
			for _, m := range tabRE.FindAllStringSubmatch(body, -1) {
				got[m[2]] = m[3]
				u, _ := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
				if w := strings.Contains(tt.target, "where="); w != u.Query().Has("where") {
					t.Errorf("tab %s links to %s: filter kept %v, want %v", m[2], m[1], !w, w)
				}
			}
			for label, n := range tt.want {
				if got[label] != n {
					t.Errorf("tab %s counts %q, want %s (all tabs: %v)", label, got[label], n, got)
				}
			}
		})
	}
}

// TestPostgresDelete deletes real jobs through the handler: one job after
// its confirmation page, a selection of jobs (the queue page's checkboxes
// send one ids= per job), never without the confirmation's token or with
// the token of other jobs, never a running job, and not at all with
// actions off.
func TestPostgresDelete(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ids := enqueueSubjects(t, pool, "a", "b", "c", "d", "e")
	// ids[4] is running: claimed by a worker that is gone.
	if _, err := pool.Exec(t.Context(), `UPDATE skipjack.send_email SET state = 'running', lease_expires_at = now() + interval '1 hour' WHERE id = $1`, ids[4]); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Queues: admins(pool), Actions: true, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	off, err := New(Config{Queues: admins(pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(id int64) bool {
		_, err := sendemail.Get(t.Context(), pool, id)
		return err == nil
	}
	one := func(id int64) string { return "/queues/send_email/jobs/" + strconv.FormatInt(id, 10) + "/delete" }

	// Refused: no token, another job's token, actions off.
	for _, r := range []*http.Request{
		post(one(ids[0]), "", nil),
		post(one(ids[0]), confirmToken(t, h, one(ids[1])), nil),
		post(one(ids[0]), confirmToken(t, h, one(ids[0])), map[string]string{"Sec-Fetch-Site": "cross-site"}),
	} {
		if res, _ := do(t, h, r); res.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s: status %d, want 403", r.URL, res.StatusCode)
		}
	}
	if res, _ := do(t, off, post(one(ids[0]), "", nil)); res.StatusCode != http.StatusForbidden {
		t.Errorf("POST with actions off: status %d, want 403", res.StatusCode)
	}
	if res, _ := do(t, off, httptest.NewRequest("GET", one(ids[0]), nil)); res.StatusCode != http.StatusForbidden {
		t.Errorf("confirmation page with actions off: status %d, want 403", res.StatusCode)
	}
	if !exists(ids[0]) {
		t.Fatal("a refused delete deleted the job")
	}

	// One job, confirmed.
	res := confirmAndPost(t, h, one(ids[0]))
	if loc := res.Header.Get("Location"); !strings.Contains(loc, "queues/send_email?") || !strings.Contains(loc, "done=delete") || !strings.Contains(loc, "changed=1") {
		t.Errorf("Location %q, want the queue page with done=delete&changed=1", loc)
	}
	if exists(ids[0]) {
		t.Error("the confirmed delete left the job")
	}

	// A selection: ids[1], ids[2] and the running ids[4].
	sel := "/queues/send_email/delete?ids=" + strconv.FormatInt(ids[1], 10) + "&ids=" + strconv.FormatInt(ids[2], 10) + "&ids=" + strconv.FormatInt(ids[4], 10)
	token := confirmToken(t, h, sel)
	list := idsText([]int64{ids[1], ids[2], ids[4]})
	// The token covers exactly these jobs: one more is refused.
	wider := idsText([]int64{ids[1], ids[2], ids[3], ids[4]})
	if res, _ := do(t, h, postForm("/queues/send_email/delete", url.Values{"token": {token}, "ids": {wider}})); res.StatusCode != http.StatusForbidden {
		t.Errorf("POST of more jobs than confirmed: status %d, want 403", res.StatusCode)
	}
	res, body := do(t, h, postForm("/queues/send_email/delete", url.Values{"token": {token}, "ids": {list}}))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST selection: status %d\n%s", res.StatusCode, body)
	}
	if loc := res.Header.Get("Location"); !strings.Contains(loc, "changed=2") || !strings.Contains(loc, "of=3") {
		t.Errorf("Location %q, want changed=2 of=3 (the running job stays)", loc)
	}
	for i, want := range []bool{false, false, false, true, true} {
		if got := exists(ids[i]); got != want {
			t.Errorf("job %d (#%d) exists: %v, want %v", ids[i], i, got, want)
		}
	}
	// The queue page offers checkboxes for every job but the running one.
	_, body = do(t, h, httptest.NewRequest("GET", "/queues/send_email", nil))
	for _, id := range []int64{ids[3], ids[4]} {
		box := `name="ids" value="` + strconv.FormatInt(id, 10) + `"`
		if got, want := strings.Contains(body, box), id != ids[4]; got != want {
			t.Errorf("checkbox of job %d shown: %v, want %v", id, got, want)
		}
	}
	if st, err := sendemail.Stats(t.Context(), pool); err != nil || st.Pending != 1 || st.Running != 1 {
		t.Errorf("stats after deletes: %+v, %v; want 1 pending, 1 running", st, err)
	}
}

// TestPostgresOverviewReconciles checks that the overview's Failed and
// Failed, last hour count the same kind of thing: two pending jobs
// cancelled by an operator (which no worker records) count in both beside
// the job a worker failed, and a paused queue's oldest pending wait reads
// paused and is left out of the all-queues line.
func TestPostgresOverviewReconciles(t *testing.T) {
	t.Parallel()
	s := seed(t)
	if n, err := sendemail.Cancel(t.Context(), s.pool, s.pending...); err != nil || n != 2 {
		t.Fatalf("Cancel: %d, %v", n, err)
	}
	for _, q := range admins(s.pool) {
		if q.Name() == "resize_image" {
			if err := q.Pause(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// send_email has no due job left; resize_image's has waited an hour.
	if _, err := s.pool.Exec(t.Context(), `UPDATE skipjack.resize_image SET run_at = now() - interval '1 hour' WHERE state = 'pending'`); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Queues: admins(s.pool), AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	res, body := do(t, h, httptest.NewRequest("GET", "/", nil))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, col := range []string{"failed", "failed-1h"} {
		if got := overviewCell(body, "send_email", col); got != "3" {
			t.Errorf("send_email %s = %q, want 3 (one failed by a worker, two cancelled)", col, got)
		}
	}
	if !regexp.MustCompile(`<tr data-queue="resize_image">(?s:.*?)data-col="oldest"><span class="paused-wait"[^>]*>paused</span> <span class="muted">\(1h`).MatchString(body) {
		t.Errorf("resize_image's oldest pending is not marked paused with its wait:\n%s", body)
	}
	if strings.Contains(regexp.MustCompile(`(?s)<tfoot>.*</tfoot>`).FindString(body), "1h") {
		t.Errorf("the all-queues line counts the paused queue's wait:\n%s", regexp.MustCompile(`(?s)<tfoot>.*</tfoot>`).FindString(body))
	}
	for _, term := range []string{"<dt>Failed, last hour</dt>", "<dt>Completed, Failed</dt>", "<dt>Oldest pending</dt>"} {
		if !strings.Contains(body, term) {
			t.Errorf("the overview does not say what %s counts", term)
		}
	}
}

func TestLimitRows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		l    skipjack.Limits
		want []string // key: in use
	}{
		{"none", skipjack.Limits{Claimed: 2}, []string{"none: 2 jobs claimed"}},
		{"concurrency", skipjack.Limits{Concurrency: 5, Claimed: 3}, []string{"concurrency: 3 of 5 slots in use"}},
		{"rate with room", skipjack.Limits{RateCount: 100, RatePer: time.Second}, []string{"rate: room to start jobs now"}},
		{"rate full", skipjack.Limits{RateCount: 100, RatePer: time.Second, RateWait: 300 * time.Millisecond}, []string{"rate: window full: next start in 300ms"}},
		{"all", skipjack.Limits{Concurrency: 2, RateCount: 1, RatePer: time.Minute, Serial: true, SerialBy: []string{"account_id"}, Claimed: 1},
			[]string{"concurrency: 1 of 2 slots in use", "rate: room to start jobs now", "serial: 1 jobs claimed"}},
		{"per key", skipjack.Limits{Concurrency: 50, PerKeyBy: []string{"tenant_id"}, PerKeyConcurrency: 2, Claimed: 4},
			[]string{"concurrency: 4 of 50 slots in use", "per-key: 4 jobs claimed, all keys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, r := range limitRows(tt.l) {
				got = append(got, r.Key+": "+r.InUse)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("limitRows(%+v) = %q, want %q", tt.l, got, tt.want)
			}
		})
	}
}

// limitedAdmin declares a concurrency limit over a real queue's admin,
// whose Limits reads the claimed jobs from the database.
type limitedAdmin struct {
	skipjack.QueueAdmin
	concurrency int
}

func (a limitedAdmin) Limits(ctx context.Context) (skipjack.Limits, error) {
	l, err := a.QueueAdmin.(skipjack.QueueLimiter).Limits(ctx)
	l.Concurrency = a.concurrency
	return l, err
}

// TestPostgresQueueLimits checks the queue page's flow control table over
// real rows: a queue without limits says so with its claimed jobs, and a
// declared concurrency shows how many of its slots are in use.
func TestPostgresQueueLimits(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ids := enqueueSubjects(t, pool, "a", "b", "c")
	if _, err := pool.Exec(t.Context(), `UPDATE skipjack.send_email SET state = 'running', lease_expires_at = now() + interval '1 hour' WHERE id = ANY($1)`, ids[:2]); err != nil {
		t.Fatal(err)
	}
	send := sendemail.Admin(pool)
	tests := []struct {
		name  string
		q     skipjack.QueueAdmin
		key   string
		inUse string
	}{
		{"none", send, "none", "2 jobs claimed"},
		{"concurrency", limitedAdmin{send, 5}, "concurrency", "2 of 5 slots in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := New(Config{Queues: []skipjack.QueueAdmin{tt.q}, AllowedHosts: testHosts})
			if err != nil {
				t.Fatal(err)
			}
			_, body := do(t, h, httptest.NewRequest("GET", "/queues/send_email", nil))
			want := `<tr data-limit="` + tt.key + `">`
			row := regexp.MustCompile(regexp.QuoteMeta(want) + `.*?data-col="in-use">([^<]*)<`).FindStringSubmatch(body)
			if row == nil || row[1] != tt.inUse {
				t.Errorf("flow control row %s: %v, want in use %q\n%s", tt.key, row, tt.inUse, regexp.MustCompile(`(?s)<table class="grid limits".*?</table>`).FindString(body))
			}
		})
	}
}
