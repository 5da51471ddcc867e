package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestQueueActionsNeedConfirmationToken checks pause and resume: a POST
// pauses the queue only with actions enabled and the token of its own
// confirmation page, and the queue page then says so.
func TestQueueActionsNeedConfirmationToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		actions bool
		token   func(t *testing.T, h *Handler) string
		status  int
		paused  bool
	}{
		{"pause", true, func(t *testing.T, h *Handler) string { return confirmToken(t, h, "/queues/alpha/pause") }, 303, true},
		{"resume's token cannot pause", true, func(t *testing.T, h *Handler) string { return confirmToken(t, h, "/queues/alpha/resume") }, 403, false},
		{"no token", true, func(*testing.T, *Handler) string { return "" }, 403, false},
		{"actions disabled", false, func(_ *testing.T, h *Handler) string { return h.tokens.issue("pause", "alpha", "", testNow) }, 403, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, q := newTestHandler(t, Config{Actions: tt.actions})
			res, body := do(t, h, post("/queues/alpha/pause", tt.token(t, h), nil))
			if res.StatusCode != tt.status {
				t.Fatalf("POST: status %d, want %d\n%s", res.StatusCode, tt.status, body)
			}
			if q.paused != tt.paused {
				t.Errorf("paused = %v, want %v", q.paused, tt.paused)
			}
			if tt.status != http.StatusSeeOther {
				return
			}
			loc, err := url.Parse("/queues/alpha/pause")
			if err == nil {
				loc, err = loc.Parse(res.Header.Get("Location"))
			}
			if err != nil {
				t.Fatal(err)
			}
			res, body = do(t, h, httptest.NewRequest("GET", loc.String(), nil))
			if res.StatusCode != 200 || !strings.Contains(body, `id="queue-state" class="state state-paused">paused`) || !strings.Contains(body, "Queue alpha paused") {
				t.Errorf("queue page after pausing: status %d, no paused state or flash:\n%s", res.StatusCode, body)
			}
		})
	}
}

// TestGroupRetryNeedsTokenForItsGroup checks the retry of a failure group:
// only with actions enabled and a token issued for exactly that group,
// and it retries exactly the group's failed jobs.
func TestGroupRetryNeedsTokenForItsGroup(t *testing.T) {
	t.Parallel()
	const group = "smtp: 550 mailbox unavailable"
	confirm := "/queues/alpha/failures/retry?" + url.Values{"error": {group}}.Encode()
	tests := []struct {
		name    string
		actions bool
		token   func(t *testing.T, h *Handler) string
		status  int
		retried []int64
	}{
		{"valid", true, func(t *testing.T, h *Handler) string { return confirmToken(t, h, confirm) }, 303, []int64{1}},
		{"another group's token", true, func(t *testing.T, h *Handler) string {
			return confirmToken(t, h, "/queues/alpha/failures/retry?error=other")
		}, 403, nil},
		{"a job retry's token", true, func(_ *testing.T, h *Handler) string { return h.tokens.issue("retry", "alpha", group, testNow) }, 403, nil},
		{"actions disabled", false, func(_ *testing.T, h *Handler) string { return h.tokens.issue(groupAction, "alpha", group, testNow) }, 403, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, q := newTestHandler(t, Config{Actions: tt.actions})
			res, body := do(t, h, postForm("/queues/alpha/failures/retry", url.Values{"token": {tt.token(t, h)}, "error": {group}}))
			if res.StatusCode != tt.status {
				t.Fatalf("POST: status %d, want %d\n%s", res.StatusCode, tt.status, body)
			}
			retries, _, _ := q.calls()
			if len(retries) != len(tt.retried) || (len(retries) > 0 && retries[0] != tt.retried[0]) {
				t.Errorf("retried %v, want %v", retries, tt.retried)
			}
		})
	}
}

// TestFailuresPage checks the failures page: groups with counts and links
// to their filtered lists, and retry links only with actions enabled.
func TestFailuresPage(t *testing.T) {
	t.Parallel()
	for _, actions := range []bool{false, true} {
		h, _ := newTestHandler(t, Config{Actions: actions})
		res, body := do(t, h, httptest.NewRequest("GET", "/queues/alpha/failures", nil))
		if res.StatusCode != 200 {
			t.Fatalf("status %d\n%s", res.StatusCode, body)
		}
		list := `href="../../queues/alpha?state=failed&amp;error=smtp%3A&#43;550&#43;mailbox&#43;unavailable"`
		if !strings.Contains(body, `data-group="smtp: 550 mailbox unavailable"`) || !strings.Contains(body, list) {
			t.Errorf("actions %v: no group row or list link %s in\n%s", actions, list, body)
		}
		if got := strings.Contains(body, "Retry group"); got != actions {
			t.Errorf("actions %v: retry link shown: %v", actions, got)
		}
	}
}

// TestPayloadFilter checks the conditions a queue page's find box takes.
func TestPayloadFilter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		conds   []string
		want    string
		wantErr string
	}{
		{[]string{"customer = 42"}, `{"customer":42}`, ""},
		{[]string{"customer=acme", "region = \"eu\""}, `{"customer":"acme","region":"eu"}`, ""},
		{[]string{"vip = true", "ship_to.zip = 10115"}, `{"ship_to":{"zip":10115},"vip":true}`, ""},
		{[]string{"big = 12345678901234567890"}, `{"big":12345678901234567890}`, ""},
		{[]string{"customer"}, "", "not a condition"},
		{[]string{"a'b = 1"}, "", "not a payload field name"},
		{[]string{"x = 1); DROP TABLE jobs; --"}, `{"x":"1); DROP TABLE jobs; --"}`, ""},
	}
	for _, tt := range tests {
		got, err := payloadFilter(tt.conds)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("payloadFilter(%q) = %q, %v; want an error with %q", tt.conds, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("payloadFilter(%q) = %q, %v; want %q", tt.conds, got, err, tt.want)
		}
	}
}

// TestChartBuckets checks that per-minute activity lands in the right bar
// of each range and that the chart's totals and quantiles add up.
func TestChartBuckets(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 4, 12, 30, 20, 0, time.UTC)
	waits := func(bucket int, n int64) []int64 {
		w := make([]int64, len(skipjack.WaitBounds)+1)
		w[bucket] = n
		return w
	}
	mins := []skipjack.ActivityMinute{
		{Minute: now.Add(-3 * time.Hour).Truncate(time.Minute), Completed: 7, Waits: waits(2, 7)},
		{Minute: now.Add(-59 * time.Minute).Truncate(time.Minute), Completed: 5, Failed: 1, Waits: waits(4, 5)},
		{Minute: now.Add(-70 * time.Minute).Truncate(time.Minute), Completed: 100, Waits: waits(12, 100)},
		{Minute: now.Truncate(time.Minute), Completed: 2, Failed: 2, Retried: 3, Waits: waits(9, 2)},
	}
	hour := newChart("t", mins, chartRanges[0], now)
	if len(hour.Bars) != 60 || hour.Total.Completed != 7 || hour.Total.Failed != 3 || hour.Total.Retried != 3 {
		t.Errorf("hour: %d bars, totals %+v; want 60 bars, 7 completed, 3 failed, 3 retried", len(hour.Bars), hour.Total)
	}
	if b := hour.Bars[0]; b.Completed != 5 || !b.Start.Equal(now.Truncate(time.Minute).Add(-59*time.Minute)) {
		t.Errorf("hour: first bar %+v, want the minute 59 minutes ago with 5 completed", b)
	}
	if b := hour.Bars[59]; b.Completed != 2 || b.Failed != 2 {
		t.Errorf("hour: last bar %+v, want this minute's 2 completed, 2 failed", b)
	}
	if hour.P50 != "≤ 20ms" || hour.P95 != "≤ 1s" {
		t.Errorf("hour: p50 %s, p95 %s; want ≤ 20ms and ≤ 1s", hour.P50, hour.P95)
	}
	day := newChart("t", mins, chartRanges[1], now)
	if len(day.Bars) != 24 || day.Total.Completed != 114 || day.Bars[23].Completed != 2 || day.Bars[22].Completed != 105 || day.Bars[20].Completed != 7 {
		t.Errorf("day: %d bars, total %d, bars 20, 22, 23: %d, %d, %d; want 24, 114, 7 (three hours ago), 105 (the hour before), 2 (this hour)",
			len(day.Bars), day.Total.Completed, day.Bars[20].Completed, day.Bars[22].Completed, day.Bars[23].Completed)
	}
}
