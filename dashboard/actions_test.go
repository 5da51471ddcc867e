package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// confirmToken GETs an action's confirmation page and returns its token.
func confirmToken(t *testing.T, h http.Handler, target string) string {
	t.Helper()
	return confirmTokenOf(t, h, httptest.NewRequest("GET", target, nil))
}

// confirmTokenOf is confirmToken for a GET request of the caller's making.
func confirmTokenOf(t *testing.T, h http.Handler, r *http.Request) string {
	t.Helper()
	res, body := do(t, h, r)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (Host %s): status %d", r.URL, r.Host, res.StatusCode)
	}
	m := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("GET %s: no token in\n%s", r.URL, body)
	}
	return m[1]
}

// post builds a same-origin form POST as a browser sends it.
func post(target, token string, hdr map[string]string) *http.Request {
	form := url.Values{}
	if token != "" {
		form.Set("token", token)
	}
	r := httptest.NewRequest("POST", target, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	return r
}

func TestActionsNeedConfirmationToken(t *testing.T) {
	t.Parallel()
	const retry1 = "/queues/alpha/jobs/1/retry"
	tests := []struct {
		name    string
		actions bool
		token   func(h *Handler) string
		target  string
		hdr     map[string]string
		clock   time.Duration // added to the clock between issue and POST
		status  int
		retried bool
	}{
		{"valid", true, func(h *Handler) string { return confirmToken(t, h, retry1) }, retry1, nil, 0, 303, true},
		{"valid, no fetch metadata (curl)", true, func(h *Handler) string { return confirmToken(t, h, retry1) }, retry1, map[string]string{"Sec-Fetch-Site": ""}, 0, 303, true},
		{"actions disabled", false, func(h *Handler) string { return h.tokens.issue("retry", "alpha", "1", testNow) }, retry1, nil, 0, 403, false},
		{"no token", true, func(*Handler) string { return "" }, retry1, nil, 0, 403, false},
		{"garbage token", true, func(*Handler) string { return "123.abc" }, retry1, nil, 0, 403, false},
		{"token of another job", true, func(h *Handler) string { return confirmToken(t, h, "/queues/alpha/jobs/4/retry") }, retry1, nil, 0, 403, false},
		{"token of another action", true, func(h *Handler) string { return confirmToken(t, h, "/queues/alpha/jobs/1/cancel") }, retry1, nil, 0, 403, false},
		{"token of another queue", true, func(h *Handler) string { return h.tokens.issue("retry", "beta", "1", testNow) }, retry1, nil, 0, 403, false},
		{"token of another secret", true, func(*Handler) string {
			return tokenSigner{key: make([]byte, 32), ttl: tokenTTL}.issue("retry", "alpha", "1", testNow)
		}, retry1, nil, 0, 403, false},
		{"expired token", true, func(h *Handler) string { return confirmToken(t, h, retry1) }, retry1, nil, tokenTTL + time.Second, 403, false},
		{"cross-site fetch", true, func(h *Handler) string { return confirmToken(t, h, retry1) }, retry1, map[string]string{"Sec-Fetch-Site": "cross-site"}, 0, 403, false},
		{"foreign origin", true, func(h *Handler) string { return confirmToken(t, h, retry1) }, retry1,
			map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}, 0, 403, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, alpha := newTestHandler(t, Config{Actions: tt.actions})
			token := tt.token(h)
			h.now = func() time.Time { return testNow.Add(tt.clock) }
			res, body := do(t, h, post(tt.target, token, tt.hdr))
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body:\n%s", res.StatusCode, tt.status, body)
			}
			retries, _, _ := alpha.calls()
			if got := len(retries) > 0; got != tt.retried {
				t.Fatalf("Retry called: %v, want %v", got, tt.retried)
			}
			if tt.retried {
				if loc := res.Header.Get("Location"); loc != "../../../../queues/alpha/jobs/1?done=retry&changed=1" {
					t.Errorf("Location %q", loc)
				}
			}
		})
	}
}

func TestActionResultShownOnJobPage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		target, want string
	}{
		{"/queues/alpha/jobs/1?done=retry&changed=1", "Job 1 retried: it is pending now."},
		{"/queues/alpha/jobs/1?done=cancel&changed=0", "Nothing changed: job 1 was not in a state that cancel applies to."},
		{"/queues/alpha/jobs/1?done=%3Cscript%3E&changed=1", "<h1>Job 1</h1>"},
	}
	h, _ := newTestHandler(t, Config{Actions: true})
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			_, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			if !strings.Contains(body, tt.want) {
				t.Errorf("body lacks %q:\n%s", tt.want, body)
			}
			if strings.Contains(body, "<script>") {
				t.Errorf("query text echoed into the page:\n%s", body)
			}
		})
	}
}

func TestActionsOffShowNoButtons(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{})
	_, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/jobs/1", nil))
	if strings.Contains(body, "/retry") || strings.Contains(body, "/cancel") {
		t.Errorf("read-only job page links to an action:\n%s", body)
	}
	res, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/jobs/1/retry", nil))
	if res.StatusCode != http.StatusForbidden || strings.Contains(body, `name="token"`) {
		t.Errorf("read-only confirmation page: status %d, token form present: %v", res.StatusCode, strings.Contains(body, `name="token"`))
	}
}

func TestJobPageOffersApplicableActions(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{Actions: true})
	tests := []struct {
		id           string
		retry, cance bool
	}{
		{"1", true, false}, // failed
		{"2", false, true}, // running
		{"3", true, true},  // scheduled
		{"4", false, true}, // pending
	}
	for _, tt := range tests {
		t.Run("job "+tt.id, func(t *testing.T) {
			t.Parallel()
			_, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/jobs/"+tt.id, nil))
			if got := strings.Contains(body, "/"+tt.id+"/retry\""); got != tt.retry {
				t.Errorf("retry offered: %v, want %v", got, tt.retry)
			}
			if got := strings.Contains(body, "/"+tt.id+"/cancel\""); got != tt.cance {
				t.Errorf("cancel offered: %v, want %v", got, tt.cance)
			}
		})
	}
}

func TestBulkLinksOnQueuePage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		actions bool
		target  string
		want    []string
		notWant []string
	}{
		{"failed page", true, "/queues/alpha?state=failed",
			[]string{`href="../queues/alpha/retry?ids=1&amp;state=failed">Retry 1 job on this page…</a>`}, []string{"/cancel?"}},
		{"all states", true, "/queues/alpha",
			[]string{`href="../queues/alpha/retry?ids=1%2C3">Retry 2 jobs on this page…</a>`, `>Cancel 49 jobs on this page…</a>`}, nil},
		{"actions off", false, "/queues/alpha", nil, []string{"/retry?", "/cancel?"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, Config{Actions: tt.actions})
			_, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
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

// postForm builds a same-origin form POST with the given fields.
func postForm(target string, fields url.Values) *http.Request {
	r := httptest.NewRequest("POST", target, strings.NewReader(fields.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

func TestBulkActionNeedsTokenForExactlyItsJobs(t *testing.T) {
	t.Parallel()
	many := make([]string, maxPageSize+1)
	for i := range many {
		many[i] = strconv.Itoa(i + 1)
	}
	tests := []struct {
		name     string
		ids      string // posted
		status   int
		retried  []int64
		location string
	}{
		{"the confirmed jobs", "1,3", 303, []int64{1, 3}, "../../queues/alpha?changed=2&done=retry&of=2&state=failed"},
		{"the same jobs in another order", "3,1,3", 303, []int64{1, 3}, "../../queues/alpha?changed=2&done=retry&of=2&state=failed"},
		{"one more job", "1,3,4", 403, nil, ""},
		{"one job less", "1", 403, nil, ""},
		{"not ids", "1,x", 400, nil, ""},
		{"too many", strings.Join(many, ","), 400, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, alpha := newTestHandler(t, Config{Actions: true})
			token := confirmToken(t, h, "/queues/alpha/retry?ids=1%2C3&state=failed")
			res, body := do(t, h, postForm("/queues/alpha/retry", url.Values{"ids": {tt.ids}, "state": {"failed"}, "token": {token}}))
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d:\n%s", res.StatusCode, tt.status, body)
			}
			if loc := res.Header.Get("Location"); loc != tt.location {
				t.Errorf("Location %q, want %q", loc, tt.location)
			}
			if retries, _, _ := alpha.calls(); !slices.Equal(retries, tt.retried) {
				t.Errorf("Retry called with %v, want %v", retries, tt.retried)
			}
		})
	}
}

func TestBulkResultShownOnQueuePage(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, Config{Actions: true})
	tests := []struct{ target, want string }{
		{"/queues/alpha?done=retry&changed=2&of=2", "Retried 2 of 2 jobs."},
		{"/queues/alpha?done=cancel&changed=1&of=3", "Cancelled 1 of 3 jobs. The others were not in a state that cancel applies to."},
		{"/queues/alpha?done=retry&changed=5&of=2", `<h1>Queue alpha</h1>`},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			t.Parallel()
			_, body := do(t, h, httptest.NewRequest("GET", tt.target, nil))
			if !strings.Contains(body, tt.want) {
				t.Errorf("body lacks %q:\n%s", tt.want, body)
			}
			if strings.Contains(tt.target, "changed=5") && strings.Contains(body, "class=\"flash") {
				t.Errorf("an impossible result is shown:\n%s", body)
			}
		})
	}
}
