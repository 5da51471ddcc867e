package browsertest

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/dashboard"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

var (
	// The dashboard's testdata, the folder CI keeps as an artifact.
	screenshotDir = flag.String("screenshots", filepath.Join("..", "testdata", "screenshots"), "folder the browser test writes its screenshots to")
	updateDocs    = flag.Bool("update-docs", false, "also write the overview screenshot with an hour of history to ../../docs/dashboard.png")
)

// chromiumPath finds headless Chromium. Outside CI a missing browser skips
// the browser test; in CI (CI set) it fails it, since .ci/run installs one.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH; .ci/run installs it with apt-get install chromium")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// newBrowser starts headless Chromium for the test and returns a tab's
// context, bounded by timeout. The browser is closed when the test ends.
// The bound only stops a hung browser: no test waits for it, and each is
// several times what the test takes on a quiet machine, since at a load
// average of 10-15 a test's pages and axe-core runs take minutes (one test
// of nine pages took 95s there against a bound of 90s).
func newBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// watchConsole starts the tab and collects the errors, warnings and
// uncaught exceptions its pages write to the console (a script blocked by
// the Content-Security-Policy shows up here); the returned func reads them.
func watchConsole(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	if err := chromedp.Do(ctx); err != nil { // start the browser and tab
		t.Fatalf("start chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	var mu sync.Mutex
	var bad []string
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s %s:%d: %s", m.Type, m.URL, m.Line+1, m.Text))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bad)
	}
}

// screenshot writes a full-page PNG of the current page to the screenshot
// folder as name.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(*screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(*screenshotDir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	if *updateDocs && name == docsScreenshot {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// step runs browser actions and fails the test with what it was doing.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitJS polls a JavaScript expression until it is true.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		t.Fatalf("waiting until %s (%s): %v", what, expr, err)
	}
}

// mountForBrowser serves h under /ops/jobs/ as a service would.
func mountForBrowser(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/ops/jobs/"
}

// pauseRefresh presses the page's pause button, so that a click inside
// the live region cannot race with its replacement.
func pauseRefresh(t *testing.T, ctx context.Context) {
	t.Helper()
	step(t, ctx, "pause auto-refresh", chromedp.Click(chromedp.ID("refresh-toggle")))
	waitJS(t, ctx, "auto-refresh is paused", `document.getElementById("refresh-toggle").getAttribute("aria-pressed") === "true"`)
}

// cellJS is a JS expression for the text of an overview cell.
func cellJS(queue, col string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-queue=%q] td[data-col=%q]')||{}).textContent`, queue, col)
}

// TestBrowserRetryFailedJob drives the dashboard in headless Chromium as an
// operator would: the overview updates in place when a job is enqueued,
// the failed count leads to the failed job, and retry with confirmation
// makes it pending, in the page and in the database. It writes a
// screenshot of every page it passes.
func TestBrowserRetryFailedJob(t *testing.T) {
	t.Parallel()
	s := seed(t)
	h, err := dashboard.New(dashboard.Config{Queues: admins(s.pool), Actions: true, RefreshInterval: 250 * time.Millisecond, Title: "shop jobs"})
	if err != nil {
		t.Fatal(err)
	}
	base := mountForBrowser(t, h)
	ctx := newBrowser(t, 3*time.Minute)
	console := watchConsole(t, ctx)
	q, id := "send_email", s.failed

	step(t, ctx, "open the overview", chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("tr[data-queue=%q]", q))))
	waitJS(t, ctx, "the overview shows one failed job", cellJS(q, "failed")+` === "1"`)
	screenshot(t, ctx, "1-overview")

	// Auto-refresh: a job enqueued now shows up without a page load.
	pending, err := chromedp.Run(ctx, chromedp.Evaluate[string](cellJS(q, "pending")))
	if err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "mark the document", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if _, err := sendemail.Enqueue(t.Context(), s.pool, sendemail.Payload{To: "dee@example.com"}); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the pending count rises in place",
		fmt.Sprintf(`%s !== %q && window.notReloaded === true && document.getElementById("live").dataset.refreshed > 0`, cellJS(q, "pending"), pending))

	pauseRefresh(t, ctx)
	step(t, ctx, "follow the failed count",
		chromedp.Click(chromedp.CSS(fmt.Sprintf("tr[data-queue=%q] td[data-col=failed] a", q))),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("tr[data-job=%q]", fmt.Sprint(id)))))
	screenshot(t, ctx, "2-queue-failed")

	pauseRefresh(t, ctx)
	step(t, ctx, "open the failed job",
		chromedp.Click(chromedp.CSS(fmt.Sprintf("tr[data-job=%q] th a", fmt.Sprint(id)))),
		chromedp.WaitVisible(chromedp.ID("job-state")))
	waitJS(t, ctx, "the job page shows the job failed", `document.getElementById("job-state").textContent === "failed"`)
	screenshot(t, ctx, "3-job")

	pauseRefresh(t, ctx)
	step(t, ctx, "click retry",
		chromedp.Click(chromedp.CSS(`.actions a[href$="/retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
	screenshot(t, ctx, "4-confirm-retry")

	step(t, ctx, "confirm",
		chromedp.Click(chromedp.CSS(`form.confirm button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	waitJS(t, ctx, "the job page shows the job pending", `document.getElementById("job-state").textContent === "pending"`)
	screenshot(t, ctx, "5-job-retried")

	if msgs := console(); len(msgs) > 0 {
		t.Errorf("the pages wrote to the console:\n%s", strings.Join(msgs, "\n"))
	}
	rec, err := sendemail.Get(t.Context(), s.pool, id)
	if err != nil || rec.State != skipjack.StatePending {
		t.Fatalf("job %d after retry: %+v, %v; want it pending in the database", id, rec, err)
	}
}

// TestBrowserRefreshEdgeCases opens a job's page in Chromium and changes
// the world under it: the job is deleted (as a completed job is in a queue
// that keeps none), or the session expires and the auth middleware
// redirects to a sign-in page. Either way the page never reloads, and the
// refresh swaps in only what the dashboard says.
func TestBrowserRefreshEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(t *testing.T, pool *pgxpool.Pool, id int64, signedOut *atomic.Bool)
		live   string // text the live region then holds ("%d": the job's id)
		status string // text the refresh status then shows
	}{
		{"job gone", func(t *testing.T, pool *pgxpool.Pool, id int64, _ *atomic.Bool) {
			if _, err := pool.Exec(t.Context(), `DELETE FROM skipjack.send_email WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		}, "Queue send_email has no job %d", "Auto-refresh stopped"},
		{"signed out", func(_ *testing.T, _ *pgxpool.Pool, _ int64, signedOut *atomic.Bool) { signedOut.Store(true) },
			"pending", "Refresh failed (not a dashboard answer; signed out?), retrying"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := newDB(t)
			id, err := sendemail.Enqueue(t.Context(), pool, sendemail.Payload{To: "ed@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			h, err := dashboard.New(dashboard.Config{Queues: admins(pool), RefreshInterval: 100 * time.Millisecond, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			var signedOut atomic.Bool
			mux := http.NewServeMux()
			mux.HandleFunc("/signin", func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprint(w, "<!doctype html><title>Sign in</title><form>Sign in</form>")
			})
			mux.Handle("/ops/jobs/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if signedOut.Load() {
					http.Redirect(w, r, "/signin", http.StatusFound)
					return
				}
				http.StripPrefix("/ops/jobs", h).ServeHTTP(w, r)
			}))
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			ctx := newBrowser(t, 2*time.Minute)
			step(t, ctx, fmt.Sprintf("open job %d", id), chromedp.Navigate(fmt.Sprintf("%s/ops/jobs/queues/send_email/jobs/%d", srv.URL, id)),
				chromedp.WaitVisible(chromedp.ID("job-state")),
				chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
			tt.change(t, pool, id, &signedOut)
			live := tt.live
			if strings.Contains(live, "%d") {
				live = fmt.Sprintf(live, id)
			}
			waitJS(t, ctx, "the refresh status says what happened",
				fmt.Sprintf(`document.getElementById("refresh-status").textContent === %q`, tt.status))
			waitJS(t, ctx, "the live region holds what the dashboard said, without a reload",
				fmt.Sprintf(`document.getElementById("live").textContent.includes(%q) && !document.getElementById("live").textContent.includes("Sign in") && window.notReloaded === true`, live))
			screenshot(t, ctx, "6-refresh-"+strings.ReplaceAll(tt.name, " ", "-"))
		})
	}
}
