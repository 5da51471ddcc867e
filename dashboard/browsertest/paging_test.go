package browsertest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/skipjack-dev/skipjack/dashboard"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
)

// firstJobJS is a JS expression for the id of a queue page's first job.
const firstJobJS = `(document.querySelector("tr[data-job]")||{dataset:{}}).dataset.job`

// tabCountJS is a JS expression for the count of a queue page's tab.
func tabCountJS(label string) string {
	return fmt.Sprintf(`([...document.querySelectorAll("nav.tabs a")].find(a => a.textContent.trim().startsWith(%q))||{querySelector:()=>({})}).querySelector(".count").textContent`, label)
}

// TestBrowserPagingFilterDelete drives a queue of 130 jobs in Chromium:
// the page lists the newest first, Older and Newer links page both ways
// to the oldest and back, a payload filter makes the tabs count its jobs
// and the page links keep it, and deleting a selection of jobs asks for
// confirmation, is refused with a forged token, and deletes them with the
// page's own.
func TestBrowserPagingFilterDelete(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ids := make([]int64, 130)
	for i := range ids {
		id, err := sendemail.Enqueue(t.Context(), pool, sendemail.Payload{To: "x@example.com", Subject: "s" + strconv.Itoa(i%2)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	h, err := dashboard.New(dashboard.Config{Queues: admins(pool), Actions: true, RefreshInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	base := mountForBrowser(t, h)
	ctx := newBrowser(t, 5*time.Minute)
	console := watchConsole(t, ctx)
	// first waits, across a page load, until the page's first job is id.
	first := func(what string, id int64) {
		t.Helper()
		step(t, ctx, what, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`table.jobs tbody tr:first-child[data-job="%d"]`, id))))
	}
	click := func(what, sel string) {
		t.Helper()
		step(t, ctx, what, chromedp.Click(chromedp.CSS(sel)))
	}

	step(t, ctx, "open the queue page", chromedp.Navigate(base+"queues/send_email"),
		chromedp.WaitVisible(chromedp.CSS("tr[data-job]")))
	first("the first page starts with the newest job", ids[129])
	waitJS(t, ctx, "the newest page has no Newer link", `document.getElementById("page-newer") === null`)
	screenshot(t, ctx, "7-queue-newest-first")
	click("go to older jobs", "#page-older")
	first("the second page starts 50 jobs older", ids[79])
	click("go to older jobs again", "#page-older")
	first("the third page starts 100 jobs older", ids[29])
	waitJS(t, ctx, "the oldest page has no Older link and ends with the oldest job",
		fmt.Sprintf(`document.getElementById("page-older") === null && [...document.querySelectorAll("tr[data-job]")].pop().dataset.job === %q`, strconv.FormatInt(ids[0], 10)))
	click("go back to newer jobs", "#page-newer")
	first("Newer shows the second page again", ids[79])
	click("go back to newer jobs again", "#page-newer")
	first("Newer shows the newest page again", ids[129])

	// A payload filter: the tabs count the jobs it selects, the links keep it.
	step(t, ctx, "filter by subject", chromedp.SendKeys(chromedp.ID("find-where"), "subject = s1"),
		chromedp.Submit(chromedp.ID("find-where")))
	step(t, ctx, "the filtered page shows the filter", chromedp.WaitVisible(chromedp.CSS(".flash.filter")))
	waitJS(t, ctx, "the filtered page lists only odd jobs", fmt.Sprintf(`location.search.includes("where=") && %s === %q`, firstJobJS, strconv.FormatInt(ids[129], 10)))
	waitJS(t, ctx, "the All and Pending tabs count the 65 filtered jobs, Failed none",
		fmt.Sprintf(`%s === "65" && %s === "65" && %s === "0"`, tabCountJS("All"), tabCountJS("Pending"), tabCountJS("Failed")))
	screenshot(t, ctx, "8-queue-filtered-counts")
	click("go to older filtered jobs", "#page-older")
	first("the second filtered page starts 50 matching jobs older", ids[29])
	waitJS(t, ctx, "the Older link kept the filter, and the Pending tab too",
		`location.search.includes("where=subject") && [...document.querySelectorAll("nav.tabs a")].every(a => a.href.includes("where=subject"))`)

	// Delete a selection: two checked jobs of the newest page.
	step(t, ctx, "open the newest page", chromedp.Navigate(base+"queues/send_email"),
		chromedp.WaitVisible(chromedp.CSS("tr[data-job]")))
	victims := []int64{ids[129], ids[127]}
	for _, id := range victims {
		click(fmt.Sprintf("check job %d", id), fmt.Sprintf(`input[name=ids][value="%d"]`, id))
	}
	click("delete the selection", "#delete-selected")
	step(t, ctx, "the confirmation page asks first", chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
	waitJS(t, ctx, "the confirmation lists the two jobs",
		fmt.Sprintf(`document.querySelector("form.confirm input[name=ids]").value === %q`, fmt.Sprintf("%d,%d", victims[1], victims[0])))
	screenshot(t, ctx, "9-confirm-delete")
	for _, id := range victims {
		if _, err := sendemail.Get(t.Context(), pool, id); err != nil {
			t.Fatalf("job %d is gone before the confirmation: %v", id, err)
		}
	}
	// A forged token is refused, and nothing is deleted.
	step(t, ctx, "submit with a forged token",
		chromedp.Evaluate[chromedp.Void](`document.querySelector("form.confirm input[name=token]").value = "1.forged"`),
		chromedp.Click(chromedp.CSS(`form.confirm button[type=submit]`)))
	step(t, ctx, "the dashboard refuses the action", chromedp.WaitVisible(chromedp.CSS(".error")))
	waitJS(t, ctx, "the page says the action was refused", `document.querySelector("h1").textContent.includes("Action refused")`)
	for _, id := range victims {
		if _, err := sendemail.Get(t.Context(), pool, id); err != nil {
			t.Fatalf("job %d is gone after a refused delete: %v", id, err)
		}
	}
	step(t, ctx, "open the confirmation again",
		chromedp.Navigate(fmt.Sprintf("%squeues/send_email/delete?ids=%d&ids=%d", base, victims[0], victims[1])),
		chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
	click("confirm", `form.confirm button[type=submit]`)
	step(t, ctx, "the queue page says what happened", chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	waitJS(t, ctx, "the queue page says both were deleted", `(document.querySelector(".flash.ok")||{}).textContent === "Deleted 2 of 2 jobs."`)
	first("the newest remaining job leads the page", ids[128])
	for _, id := range victims {
		if _, err := sendemail.Get(t.Context(), pool, id); err == nil {
			t.Errorf("job %d still exists after the confirmed delete", id)
		}
	}

	// Delete one job from its page.
	step(t, ctx, "open job "+strconv.FormatInt(ids[128], 10), chromedp.Navigate(fmt.Sprintf("%squeues/send_email/jobs/%d", base, ids[128])),
		chromedp.WaitVisible(chromedp.ID("job-state")))
	click("click delete", `.actions a[href$="/delete"]`)
	step(t, ctx, "the confirmation page asks first", chromedp.WaitVisible(chromedp.CSS(`form.confirm button[type=submit]`)))
	click("confirm", `form.confirm button[type=submit]`)
	step(t, ctx, "the queue page says what happened", chromedp.WaitVisible(chromedp.CSS(".flash.ok")))
	waitJS(t, ctx, "the queue page says the job was deleted", `(document.querySelector(".flash.ok")||{}).textContent === "Deleted 1 of 1 job."`)
	if _, err := sendemail.Get(t.Context(), pool, ids[128]); err == nil {
		t.Errorf("job %d still exists after the confirmed delete", ids[128])
	}
	if msgs := console(); len(msgs) > 0 {
		t.Logf("console (a refused action's 403 is expected):\n%v", msgs)
	}
}
