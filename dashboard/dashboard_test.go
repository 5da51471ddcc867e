package dashboard

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// testNow is the fixed clock of the fake-queue tests.
var testNow = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// testHosts are the AllowedHosts of the tests' handlers: the Host of
// httptest.NewRequest's requests.
var testHosts = []string{"example.com"}

// newTestHandler returns a dashboard over fake queues "alpha" (60 jobs)
// and "beta" (4 jobs) on the fixed clock.
func newTestHandler(t *testing.T, cfg Config) (*Handler, *fakeQueue) {
	t.Helper()
	alpha := newFakeQueue("alpha", 60, testNow)
	if cfg.Queues == nil {
		cfg.Queues = []skipjack.QueueAdmin{alpha, newFakeQueue("beta", 4, testNow)}
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	if cfg.AllowedHosts == nil {
		cfg.AllowedHosts = testHosts
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.now = func() time.Time { return testNow }
	return h, alpha
}

// do runs one request against h and returns the response and its body.
func do(t *testing.T, h http.Handler, r *http.Request) (*http.Response, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	q := newFakeQueue("alpha", 1, testNow)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no queues", Config{}, "no queues"},
		{"nil queue", Config{Queues: []skipjack.QueueAdmin{q, nil}}, "queue 1 is nil"},
		{"duplicate", Config{Queues: []skipjack.QueueAdmin{q, newFakeQueue("alpha", 1, testNow)}}, `"alpha" is listed twice`},
		{"slash in name", Config{Queues: []skipjack.QueueAdmin{newFakeQueue("a/b", 1, testNow)}}, "cannot be a path segment"},
		{"empty name", Config{Queues: []skipjack.QueueAdmin{newFakeQueue("", 1, testNow)}}, "cannot be a path segment"},
		{"page size", Config{Queues: []skipjack.QueueAdmin{q}, PageSize: 501}, "page size 501"},
		{"short secret", Config{Queues: []skipjack.QueueAdmin{q}, Secret: []byte("short")}, "at least 32"},
		{"bad origin", Config{Queues: []skipjack.QueueAdmin{q}, TrustedOrigins: []string{"not a url"}}, "trusted origin"},
		{"allowed host URL", Config{Queues: []skipjack.QueueAdmin{q}, AllowedHosts: []string{"https://jobs.example.com"}}, `allowed host "https://jobs.example.com": want a host name`},
		{"allowed host empty", Config{Queues: []skipjack.QueueAdmin{q}, AllowedHosts: []string{""}}, `allowed host "": no host name`},
		{"allowed host port", Config{Queues: []skipjack.QueueAdmin{q}, AllowedHosts: []string{"jobs.example.com:https"}}, `allowed host "jobs.example.com:https": port "https" is not a number`},
		{"allowed host wildcard", Config{Queues: []skipjack.QueueAdmin{q}, AllowedHosts: []string{"*.example.com"}}, `allowed host "*.example.com"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{Actions: true})
	tests := []struct {
		method, target string
		status         int
		contains       []string
		location       string
	}{
		{"GET", "/", 200, []string{"<h1>Queues</h1>", `href="./queues/alpha?state=failed"`, "All queues"}, ""},
		{"HEAD", "/", 200, nil, ""},
		{"GET", "/queues/alpha", 200, []string{"<h1>Queue alpha</h1>", `href="../queues/alpha/jobs/1"`, `rel="next"`}, ""},
		{"GET", "/queues/alpha?state=failed", 200, []string{"Failed jobs of alpha", `data-job="1"`}, ""},
		{"GET", "/queues/alpha?state=bogus", 400, []string{"Unknown state"}, ""},
		{"GET", "/queues/alpha?after=x", 400, []string{"must be a job id"}, ""},
		{"GET", "/queues/alpha?id=7", 303, nil, "../queues/alpha/jobs/7"},
		{"GET", "/queues/alpha?id=999", 404, []string{"Queue alpha has no job 999."}, ""},
		{"GET", "/queues/alpha?id=abc", 400, []string{"is not a job id"}, ""},
		{"GET", "/queues/nope", 404, []string{"no queue named"}, ""},
		{"GET", "/queues/alpha/jobs/1", 200, []string{"<h1>Job 1</h1>", "smtp: 550 mailbox unavailable", "host-2/3", `href="../../../queues/alpha/jobs/1/retry"`}, ""},
		{"GET", "/queues/alpha/jobs/999", 404, []string{"has no job 999"}, ""},
		{"GET", "/queues/alpha/jobs/01", 404, nil, ""},
		{"GET", "/queues/alpha/jobs/-1", 404, nil, ""},
		{"GET", "/queues/alpha/jobs/1/retry", 200, []string{"Retry job 1?", `name="token"`, "smtp: 550 mailbox unavailable"}, ""},
		{"GET", "/queues/alpha/jobs/1/explode", 404, []string{"No such action."}, ""},
		{"GET", "/queues/alpha/jobs/1/", 404, nil, ""},
		{"GET", "/queues//jobs", 404, nil, ""},
		{"GET", "/assets/app.css", 200, []string{"--bg"}, ""},
		{"GET", "/assets/app.js", 200, []string{"X-Skipjack-Partial"}, ""},
		{"GET", "/assets/missing.js", 404, nil, ""},
		{"GET", "/nowhere", 404, nil, ""},
		{"DELETE", "/", 405, nil, ""},
		{"POST", "/queues/alpha", 405, nil, ""},
		{"POST", "/queues/alpha/jobs/1", 405, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			t.Parallel()
			res, body := do(t, h, httptest.NewRequest(tt.method, tt.target, nil))
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body:\n%s", res.StatusCode, tt.status, body)
			}
			for _, s := range tt.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body lacks %q:\n%s", s, body)
				}
			}
			if got := res.Header.Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			if tt.status == 200 && strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
				if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
					t.Errorf("Content-Security-Policy %q", csp)
				}
			}
		})
	}
}

// hrefRE finds the links a crawler follows: href and src attributes and
// the actions of GET forms (POST forms are actions, not pages).
var hrefRE = regexp.MustCompile(`(?:href=|src=|<form [^>]*method="get"[^>]*action=)"([^"#]*)"`)

// TestMountedUnderPrefix crawls the dashboard mounted as services mount
// it (under a prefix with or without a trailing slash, behind a
// middleware, or at the root) and checks that every link of every page
// resolves under the mount point and answers 200.
func TestMountedUnderPrefix(t *testing.T) {
	t.Parallel()
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer ok" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	tests := []struct {
		name  string
		mount string // the dashboard's URL path
		mux   func(h http.Handler) *http.ServeMux
		// bare is the mount point without its slash and where it
		// redirects, or "".
		bare, bareTo string
	}{
		{"StripPrefix without slash", "/ops/jobs/", func(h http.Handler) *http.ServeMux {
			mux := http.NewServeMux()
			mux.Handle("/ops/jobs/", auth(http.StripPrefix("/ops/jobs", h)))
			mux.Handle("/ops/jobs", auth(http.StripPrefix("/ops/jobs", h)))
			return mux
		}, "/ops/jobs", "jobs/"},
		{"StripPrefix with slash", "/ops/jobs/", func(h http.Handler) *http.ServeMux {
			mux := http.NewServeMux()
			mux.Handle("/ops/jobs/", auth(http.StripPrefix("/ops/jobs/", h)))
			return mux
		}, "", ""},
		{"root", "/", func(h http.Handler) *http.ServeMux {
			mux := http.NewServeMux()
			mux.Handle("/", auth(h))
			return mux
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, Config{Actions: true, PageSize: 20})
			srv := httptest.NewServer(tt.mux(h))
			t.Cleanup(srv.Close)
			crawlUnder(t, srv, tt.mount, tt.bare, tt.bareTo)
		})
	}
}

// crawlUnder crawls the dashboard at srv.URL+mount.
func crawlUnder(t *testing.T, srv *httptest.Server, mount, bare, bareTo string) {
	t.Helper()
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	get := func(u string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer ok")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if bare != "" {
		res, _ := get(srv.URL + bare)
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusMovedPermanently || loc != bareTo {
			t.Fatalf("GET %s: %d Location %q, want 301 to %s", bare, res.StatusCode, loc, bareTo)
		}
	}
	seen := map[string]bool{}
	queue := []string{srv.URL + mount}
	for len(queue) > 0 && len(seen) < 200 {
		page := queue[0]
		queue = queue[1:]
		if seen[page] {
			continue
		}
		seen[page] = true
		res, body := get(page)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", page, res.StatusCode)
			continue
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			continue
		}
		base, _ := url.Parse(page)
		for _, m := range hrefRE.FindAllStringSubmatch(body, -1) {
			ref, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
			if err != nil {
				t.Errorf("%s: bad link %q", page, m[1])
				continue
			}
			abs := base.ResolveReference(ref)
			if !strings.HasPrefix(abs.Path, mount) {
				t.Errorf("%s: link %q leaves the mount point: %s", page, m[1], abs)
				continue
			}
			queue = append(queue, abs.String())
		}
	}
	for _, want := range []string{
		"queues/alpha", "queues/alpha?state=failed", "queues/alpha/jobs/1",
		"queues/alpha/jobs/1/retry", "queues/alpha?after=20", "assets/app.js?v=" + assetVersion,
	} {
		if !seen[srv.URL+mount+want] {
			t.Errorf("crawl never reached %s%s", mount, want)
		}
	}
}

func TestPartialRendersOnlyLiveRegion(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{})
	for _, target := range []string{"/", "/queues/alpha", "/queues/alpha/jobs/1"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set(partialHeader, "live")
			res, body := do(t, h, r)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			if strings.Contains(body, "<html") || strings.Contains(body, "<h1>") {
				t.Errorf("partial holds the whole page:\n%s", body)
			}
			if !strings.Contains(body, "<table") && !strings.Contains(body, "<dl") {
				t.Errorf("partial holds no figures:\n%s", body)
			}
			if res.Header.Get("Vary") != partialHeader || res.Header.Get(partialHeader) != "live" {
				t.Errorf("Vary %q, %s %q", res.Header.Get("Vary"), partialHeader, res.Header.Get(partialHeader))
			}
		})
	}
}

// TestListIsBoundedAndKeyset checks that a queue page asks for one page
// plus one row, starts after the given id and links the next page after
// its last row.
func TestListIsBoundedAndKeyset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		target    string
		want      skipjack.ListParams
		next      string
		rows      int
		firstLink bool
	}{
		{"/queues/alpha", skipjack.ListParams{Limit: 26}, "../queues/alpha?after=25", 25, false},
		{"/queues/alpha?after=25", skipjack.ListParams{AfterID: 25, Limit: 26}, "../queues/alpha?after=50", 25, true},
		{"/queues/alpha?after=50", skipjack.ListParams{AfterID: 50, Limit: 26}, "", 10, true},
		{"/queues/alpha?state=pending", skipjack.ListParams{State: "pending", Limit: 26}, "../queues/alpha?state=pending&amp;after=27", 25, false},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			h, alpha := newTestHandler(t, Config{PageSize: 25})
			_, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			_, _, lists := alpha.calls()
			if len(lists) != 1 || lists[0] != tt.want {
				t.Fatalf("List calls %+v, want one %+v", lists, tt.want)
			}
			if got := strings.Count(body, "<tr data-job="); got != tt.rows {
				t.Errorf("%d rows, want %d", got, tt.rows)
			}
			hasNext := strings.Contains(body, `rel="next"`)
			if hasNext != (tt.next != "") || (hasNext && !strings.Contains(body, `href="`+tt.next+`" rel="next"`)) {
				t.Errorf("next link: want %q in\n%s", tt.next, body)
			}
			if got := strings.Contains(body, ">First page<"); got != tt.firstLink {
				t.Errorf("first page link: %v, want %v", got, tt.firstLink)
			}
		})
	}
}

func TestDatabaseErrorsAreShown(t *testing.T) {
	t.Parallel()
	broken := newFakeQueue("broken", 1, testNow)
	broken.err = errors.New("connection refused")
	h, _ := newTestHandler(t, Config{Queues: []skipjack.QueueAdmin{newFakeQueue("alpha", 3, testNow), broken}})
	tests := []struct {
		target string
		status int
	}{
		{"/", 200}, // the other queues still show
		{"/queues/broken", 500},
		{"/queues/broken/jobs/1", 500},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			res, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			if res.StatusCode != tt.status || !strings.Contains(body, "connection refused") {
				t.Errorf("status %d (want %d), body:\n%s", res.StatusCode, tt.status, body)
			}
		})
	}
}

func TestPayloadIsPrettyAndEscaped(t *testing.T) {
	t.Parallel()
	q := newFakeQueue("alpha", 1, testNow)
	q.jobs[1].Payload = []byte(`{"to":"</pre><script>alert(1)</script>","n":1}`)
	h, _ := newTestHandler(t, Config{Queues: []skipjack.QueueAdmin{q}})
	_, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/jobs/1", nil))
	if strings.Contains(body, "<script>alert") {
		t.Fatalf("payload not escaped:\n%s", body)
	}
	if !strings.Contains(body, "{\n  &#34;to&#34;: &#34;\\u003c/pre\\u003e") && !strings.Contains(body, "{\n  &#34;to&#34;: &#34;&lt;/pre&gt;") {
		t.Errorf("payload not pretty-printed:\n%s", body)
	}
}

// TestJobErrorWithoutWorker shows a job cancelled while pending, whose
// error entry has no worker: the worker cell says so with a dash instead of
// an empty code element.
func TestJobErrorWithoutWorker(t *testing.T) {
	t.Parallel()
	q := newFakeQueue("alpha", 4, testNow)
	fin := testNow.Add(-time.Second)
	r := q.jobs[4]
	r.State, r.FinishedAt = skipjack.StateFailed, &fin
	r.Errors = []skipjack.AttemptError{{Attempt: 0, At: fin, Error: "cancelled"}}
	h, _ := newTestHandler(t, Config{Queues: []skipjack.QueueAdmin{q}})
	_, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/jobs/4", nil))
	if strings.Contains(body, "<code></code>") {
		t.Errorf("the error row of a job no worker ran shows an empty worker:\n%s", body)
	}
	if !strings.Contains(body, `title="no worker ran this attempt">–</span>`) {
		t.Errorf("the error row of a job no worker ran lacks the dash:\n%s", body)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{850 * time.Millisecond, "850ms"},
		{42 * time.Second, "42s"},
		{3*time.Minute + 12*time.Second, "3m 12s"},
		{3 * time.Minute, "3m"},
		{2*time.Hour + 5*time.Minute + 9*time.Second, "2h 5m"},
		{76 * time.Hour, "3d 4h"},
		{-90 * time.Second, "1m 30s"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.d); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// TestOverviewFiguresAreShared checks that concurrent overviews share one
// round of Stats per queue, and that figures older than overviewMaxAge are
// read again.
func TestOverviewFiguresAreShared(t *testing.T) {
	t.Parallel()
	h, alpha := newTestHandler(t, Config{})
	statsCalls := func() int {
		alpha.mu.Lock()
		defer alpha.mu.Unlock()
		return alpha.stats
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if res, _ := do(t, h, httptest.NewRequest("GET", "/", nil)); res.StatusCode != http.StatusOK {
				t.Errorf("status %d", res.StatusCode)
			}
		})
	}
	wg.Wait()
	if got := statsCalls(); got != 1 {
		t.Fatalf("8 concurrent overviews called Stats %d times, want 1", got)
	}
	h.now = func() time.Time { return testNow.Add(overviewMaxAge - time.Millisecond) }
	do(t, h, httptest.NewRequest("GET", "/", nil))
	if got := statsCalls(); got != 1 {
		t.Fatalf("an overview within overviewMaxAge called Stats again (%d calls)", got)
	}
	h.now = func() time.Time { return testNow.Add(overviewMaxAge) }
	do(t, h, httptest.NewRequest("GET", "/", nil))
	if got := statsCalls(); got != 2 {
		t.Fatalf("an overview after overviewMaxAge: %d Stats calls, want 2", got)
	}
}

// TestScheduledTab checks the queue page's Scheduled tab, which the
// overview's Scheduled column links to: it lists only pending jobs whose
// run_at is in the future.
func TestScheduledTab(t *testing.T) {
	t.Parallel()
	h, alpha := newTestHandler(t, Config{PageSize: 25})
	_, overview := do(t, h, httptest.NewRequest("GET", "/", nil))
	if !strings.Contains(overview, `href="./queues/alpha?state=scheduled" aria-label="alpha: 1 scheduled">1</a>`) {
		t.Errorf("the overview's Scheduled column does not link to the tab:\n%s", overview)
	}
	_, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha?state=scheduled", nil))
	if got := strings.Count(body, "<tr data-job="); got != 1 {
		t.Errorf("%d rows, want 1 (job 3, the only scheduled one):\n%s", got, body)
	}
	if !strings.Contains(body, `<tr data-job="3"`) {
		t.Errorf("job 3 is not listed:\n%s", body)
	}
	if !strings.Contains(body, ">Scheduled") {
		t.Errorf("no Scheduled tab:\n%s", body)
	}
	_, _, lists := alpha.calls()
	if want := (skipjack.ListParams{State: skipjack.StatePending, Limit: scheduledScan.size}); len(lists) != 1 || lists[0] != want {
		t.Errorf("List calls %+v, want one %+v", lists, want)
	}
}

// TestListScheduledBound checks that the Scheduled tab's scan of pending
// jobs stops at its bound and says where to continue, and finds the
// scheduled jobs beyond it on the next page.
func TestListScheduledBound(t *testing.T) {
	t.Parallel()
	q := newFakeQueue("alpha", 60, testNow)
	for _, id := range []int64{3, 4, 50} {
		q.jobs[id].RunAt = testNow.Add(time.Hour)
	}
	tests := []struct {
		after      int64
		limit      int
		wantIDs    []int64
		wantResume int64
	}{
		{0, 10, []int64{3, 4}, 32}, // 3 pages of 10 pending jobs (ids 3..32), then the bound
		{32, 10, []int64{50}, 0},   // the rest, found before the bound
		{0, 1, []int64{3}, 0},      // a full page stops the scan
		{50, 10, nil, 0},           // nothing after the last one
	}
	for _, tt := range tests {
		recs, resume, err := listScheduled(t.Context(), q, skipjack.ListParams{}, tt.after, tt.limit, testNow, scanBound{pages: 3, size: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tt.wantIDs) || resume != tt.wantResume {
			t.Errorf("after %d, limit %d: ids %v, resume %d; want %v, %d", tt.after, tt.limit, ids, resume, tt.wantIDs, tt.wantResume)
		}
	}
}

// plainAdmin is a QueueAdmin with nothing more: embedding the interface
// hides the fake's QueueInsights methods, as a QueueAdmin written by hand
// would lack them.
type plainAdmin struct{ skipjack.QueueAdmin }

// TestQueueAdminWithoutInsights checks that a QueueAdmin that does not
// implement skipjack.QueueInsights still gets every page: the overview
// counts the last hour from Finished, the queue page lists its jobs, and
// the charts and failure groups say why they are missing.
func TestQueueAdminWithoutInsights(t *testing.T) {
	t.Parallel()
	q := newFakeQueue("alpha", 60, testNow)
	h, _ := newTestHandler(t, Config{Queues: []skipjack.QueueAdmin{plainAdmin{q}}})
	tests := []struct {
		path       string
		wantStatus int
		want       string
	}{
		{"/", http.StatusOK, "alpha"},
		{"/queues/alpha", http.StatusOK, "does not implement skipjack.QueueInsights"},
		{"/queues/alpha/failures", http.StatusInternalServerError, "does not implement skipjack.QueueInsights"},
	}
	for _, tt := range tests {
		res, body := do(t, h, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if res.StatusCode != tt.wantStatus || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s: %d, body contains %q: %v; want %d and it", tt.path, res.StatusCode, tt.want, strings.Contains(body, tt.want), tt.wantStatus)
		}
	}
}
