package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/dashboard"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/syncaccount"
)

// docsScreenshot is the screenshot that -update-docs copies to
// docs/dashboard.png, the README's picture of the dashboard.
const docsScreenshot = "h1-overview"

// seededMinutes is how many minutes of history seedHistory writes: all of
// them lie inside the hour chart's 60 minutes even if the clock passes a
// few minute boundaries before the page renders.
const seededMinutes = 50

// seededMinute is what seedHistory records for a queue m minutes ago.
func seededMinute(queue string, m int) (completed, failed int64, bucket int) {
	switch queue {
	case syncaccount.Name:
		completed, bucket = int64(20+(m*7)%13), 3+m%6
		if m%9 == 0 {
			failed = int64(m % 4)
		}
	default:
		completed, bucket = int64(5+m%4), 5+m%3
		if m%12 == 0 {
			failed = 1
		}
	}
	return completed, failed, bucket
}

// seedHistory writes an hour of per-minute history into the counts table,
// as workers that ran for the past hour would have: minutes 2 to
// seededMinutes+1 ago, for sync_account (which deletes completed jobs at
// ack) and send_email, with each minute's waits in one histogram bucket.
//
// It returns the minute (on the database's clock) the minutes are counted
// back from.
func seedHistory(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var base time.Time
	if err := pool.QueryRow(t.Context(), `SELECT date_trunc('minute', now())`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{syncaccount.Name, "send_email"} {
		for m := 2; m <= seededMinutes+1; m++ {
			completed, failed, bucket := seededMinute(q, m)
			waits := make([]int64, len(skipjack.WaitBounds)+1)
			waits[bucket] = completed
			_, err := pool.Exec(t.Context(), `INSERT INTO skipjack._skipjack_counts (queue, minute, worker, completed, failed, waits)
				VALUES ($1, $2, 'history/1', $3, $4, $5)`,
				q, base.Add(-time.Duration(m)*time.Minute), completed, failed, waits)
			if err != nil {
				t.Fatalf("seed history: %v", err)
			}
		}
	}
	return base
}

// failSyncJobs runs a sync_account worker over jobs for accounts 101..106
// that fail permanently: four with "account N not found" errors that
// differ only in their numbers and ids, two with another error. The
// periodic job (account 0) completes.
func failSyncJobs(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	for id := int64(101); id <= 106; id++ {
		if _, err := syncaccount.Enqueue(ctx, pool, syncaccount.Payload{AccountID: id, Customer: 7, Region: "eu"}); err != nil {
			t.Fatal(err)
		}
	}
	stop := runWorker(t, syncaccount.NewWorker(pool, func(_ context.Context, job *syncaccount.Job) error {
		switch id := job.Payload.AccountID; {
		case id == 0:
			return nil
		case id <= 104:
			return skipjack.Permanent(fmt.Errorf("account %d not found (request 3f2b%04d-9c1d-4e5f-a6b7-c8d9e0f1a2b3)", id, id))
		default:
			return skipjack.Permanent(errors.New("upstream: 503 service unavailable"))
		}
	}, workerConfig).Run)
	waitFor(t, "the sync_account jobs have failed", func() (bool, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT count(*) FROM skipjack.sync_account WHERE state = 'failed'`).Scan(&n)
		return n == 6, err
	})
	stop()
}

// TestBrowserHistoryFailuresFind drives the second round of the dashboard
// in Chromium over a database with an hour of recorded history: the
// overview's and a delete-at-ack queue's charts show the seeded counts
// (checked bar by bar), the failures page groups errors that differ only
// in numbers and ids and retries a group from the keyboard, the queue page
// finds jobs by a payload field and lists the periodic job's next slots.
// Every page passes axe-core's serious and critical rules, and gets a
// screenshot (h*.png in the screenshot folder).
func TestBrowserHistoryFailuresFind(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	s := seed(t)
	ctx := t.Context()
	failSyncJobs(t, s.pool)
	base0 := seedHistory(t, s.pool)
	for i, c := range []int64{42, 42, 7} {
		if _, err := syncaccount.Enqueue(ctx, s.pool, syncaccount.Payload{AccountID: 201 + int64(i), Customer: c, Region: "us"}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := dashboard.New(dashboard.Config{Queues: admins(s.pool), Actions: true, RefreshInterval: -1, Title: "shop jobs"})
	if err != nil {
		t.Fatal(err)
	}
	base := mountForBrowser(t, h)
	bctx := newBrowser(t, 5*time.Minute)
	console := watchConsole(t, bctx)
	page := func(name, url, ready string) {
		t.Helper()
		step(t, bctx, "open "+name, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(ready)))
		screenshot(t, bctx, name)
		checkAccessibility(t, bctx, name, axe)
		noFakeButtons(t, bctx, name)
	}

	page(docsScreenshot, base, `svg[data-chart=throughput]`)
	page("h2-overview-day", base+"?range=day", `section[data-range=day] svg[data-chart=throughput]`)

	q := syncaccount.Name
	page("h3-queue", base+"queues/"+q, `svg[data-chart=waits]`)
	// The chart's bars against the seeded minutes (the current and the
	// previous minute also hold what the workers above recorded).
	for m := 3; m <= seededMinutes+1; m += 7 {
		completed, failed, _ := seededMinute(q, m)
		at := base0.Add(-time.Duration(m) * time.Minute)
		got, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](fmt.Sprintf(
			`(() => { const g = document.querySelector('svg[data-chart=throughput] g[data-start=%q]'); return g ? [g.dataset.completed, g.dataset.failed] : []; })()`,
			at.UTC().Format(time.RFC3339))))
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{strconv.FormatInt(completed, 10), strconv.FormatInt(failed, 10)}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("bar of %s: completed,failed = %v, want %v (seeded)", at.UTC().Format("15:04"), got, want)
		}
	}
	var wantTotal int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(completed), 0) FROM skipjack._skipjack_counts
		WHERE queue = $1 AND minute >= date_trunc('minute', now()) - interval '59 minutes'`, q).Scan(&wantTotal); err != nil {
		t.Fatal(err)
	}
	gotTotal, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('[data-total=completed]').textContent`))
	if err != nil || gotTotal != strconv.FormatInt(wantTotal, 10) {
		t.Errorf("queue chart total completed = %q (%v), want %d as recorded", gotTotal, err, wantTotal)
	}
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('table.periodic ul.slots li').length`)); err != nil || n != skipjack.ScheduleSlotsShown {
		t.Errorf("periodic job lists %d next slots (%v), want %d", n, err, skipjack.ScheduleSlotsShown)
	}

	// Find a job by a payload field, from the keyboard.
	tabTo(t, bctx, "h3-queue", "#find-where")
	step(t, bctx, "type a payload condition and press Enter", chromedp.KeyEvent("customer = 42\r"),
		chromedp.WaitVisible(chromedp.CSS(`.filter`)))
	screenshot(t, bctx, "h4-find")
	checkAccessibility(t, bctx, "h4-find", axe)
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('table.jobs tr[data-job]').length`)); err != nil || n != 2 {
		t.Errorf("customer = 42 lists %d jobs (%v), want 2", n, err)
	}

	page("h5-failures", base+"queues/"+q+"/failures", `table.groups`)
	group := `account N not found (request <id>)`
	jobs, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('tr[data-group=%q] td[data-col=jobs]').textContent`, group)))
	if err != nil || jobs != "4" {
		t.Fatalf("group %q has %q jobs (%v), want 4", group, jobs, err)
	}
	// Retry the group with the keyboard alone: Tab to its link, Enter,
	// Tab to the confirmation's button, Enter.
	tabTo(t, bctx, "h5-failures", fmt.Sprintf(`tr[data-group=%q] a.button`, group))
	step(t, bctx, "press Enter on Retry group", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
	screenshot(t, bctx, "h6-confirm-group")
	checkAccessibility(t, bctx, "h6-confirm-group", axe)
	tabTo(t, bctx, "h6-confirm-group", `form.confirm button[type=submit]`)
	step(t, bctx, "press Enter on the confirmation", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	screenshot(t, bctx, "h7-group-retried")
	checkAccessibility(t, bctx, "h7-group-retried", axe)
	var pending, failed int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'failed')
		FROM skipjack.sync_account WHERE (payload->>'account_id')::int BETWEEN 101 AND 106`).Scan(&pending, &failed); err != nil {
		t.Fatal(err)
	}
	if pending != 4 || failed != 2 {
		t.Errorf("after the group retry: %d pending, %d failed; want the group's 4 pending, the other 2 failed", pending, failed)
	}

	// Pause and resume the queue from the keyboard; the overview shows
	// the pause.
	for i, act := range []string{"pause", "resume"} {
		want := map[string]string{"pause": "paused", "resume": "running"}[act]
		shot := fmt.Sprintf("h%d-confirm-%s", 8+2*i, act)
		page("h"+strconv.Itoa(8+2*i)+"-queue-before-"+act, base+"queues/"+q, `#queue-toggle`)
		tabTo(t, bctx, "queue page", `#queue-toggle`)
		step(t, bctx, "press Enter on "+act, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
		screenshot(t, bctx, shot)
		checkAccessibility(t, bctx, shot, axe)
		tabTo(t, bctx, shot, `form.confirm button[type=submit]`)
		step(t, bctx, "confirm "+act, chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
		waitJS(t, bctx, "the queue page shows the queue "+want, fmt.Sprintf(`document.getElementById("queue-state").textContent === %q`, want))
		st, err := syncaccount.Stats(ctx, s.pool)
		if err != nil || st.Paused != (act == "pause") {
			t.Fatalf("after %s: Stats %+v, %v; want paused %v", act, st, err, act == "pause")
		}
		if act == "pause" {
			page("h9-overview-paused", base, fmt.Sprintf(`tr[data-queue=%q] [data-col=paused]`, q))
		}
	}

	failedID := strconv.FormatInt(s.failed, 10)
	page("h12-job", base+"queues/send_email/jobs/"+failedID, `#job-state`)
	page("h13-confirm-retry", base+"queues/send_email/jobs/"+failedID+"/retry", `form.confirm button[type=submit]`)
	page("h14-confirm-many", base+"queues/send_email/retry?ids="+failedID, `form.confirm button[type=submit]`)
	page("h15-scheduled", base+"queues/send_email?state=scheduled", `table.jobs`)
	page("h16-group-list", base+"queues/"+q+"?state=failed&error="+url.QueryEscape(group), `.filter`)
	if msgs := console(); len(msgs) > 0 {
		t.Errorf("the pages wrote to the console:\n%s", strings.Join(msgs, "\n"))
	}
	// Last, since the browser logs the 404 of the page itself.
	page("h17-not-found", base+"queues/no_such_queue", `p.error`)
}
