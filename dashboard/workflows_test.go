package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/resizeimage"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/sendemail"
	"github.com/skipjack-dev/skipjack/dashboard/internal/testjobs/thumbnails"
)

// TestPostgresWorkflowPages runs a diamond workflow (a, then b and c,
// then d) whose step b fails for good, so that d is cancelled, starts a
// second one that no worker touches, and checks the workflows list, the
// workflow page's graph and table, and the workflow link of a step's job
// page against the database.
func TestPostgresWorkflowPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newDB(t)
	// b's error carries markup, which every page must escape.
	const failure = `smtp: <b>550</b> "mailbox" & more`
	failedID, err := thumbnails.Start(ctx, pool, thumbnails.Steps{
		A: resizeimage.Payload{ImageID: 1, Width: 10},
		B: sendemail.Payload{To: "ada@example.com"},
		C: resizeimage.Payload{ImageID: 2, Width: 20},
		D: sendemail.Payload{To: "bob@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopResize := runWorker(t, resizeimage.NewWorker(pool, func(context.Context, *resizeimage.Job) error { return nil }, workerConfig).Run)
	stopEmail := runWorker(t, sendemail.NewWorker(pool, func(context.Context, *sendemail.Job) error { return errors.New(failure) }, workerConfig).Run)
	var done *skipjack.WorkflowRecord
	waitFor(t, "the first workflow has failed", func() (bool, error) {
		done, err = thumbnails.Get(ctx, pool, failedID)
		return err == nil && done.State == skipjack.WorkflowFailed, err
	})
	stopResize()
	stopEmail()
	runningID, err := thumbnails.Start(ctx, pool, thumbnails.Steps{})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := sendemail.Enqueue(ctx, pool, sendemail.Payload{To: "carol@example.com"})
	if err != nil {
		t.Fatal(err)
	}

	h, err := New(Config{Queues: admins(pool), Workflows: []skipjack.WorkflowAdmin{thumbnails.Admin(pool)}, AllowedHosts: testHosts})
	if err != nil {
		t.Fatal(err)
	}
	wfRow := func(id int64) string { return `<tr data-workflow="` + strconv.FormatInt(id, 10) + `">` }
	failedPath := "/workflows/" + strconv.FormatInt(failedID, 10)

	t.Run("list", func(t *testing.T) {
		_, body := get(t, h, "/workflows", http.StatusOK)
		i, j := strings.Index(body, wfRow(runningID)), strings.Index(body, wfRow(failedID))
		if i < 0 || j < 0 || i > j {
			t.Errorf("want workflow %d listed before %d (newest first), at %d and %d:\n%s", runningID, failedID, i, j, body)
		}
		for _, want := range []string{`href="./workflows/` + strconv.FormatInt(failedID, 10) + `"`, "4 of 4", "(2 failed)", "0 of 4", "state-running", "state-failed"} {
			if !strings.Contains(body, want) {
				t.Errorf("workflows page lacks %q", want)
			}
		}
		_, body = get(t, h, "/workflows?state=failed", http.StatusOK)
		if strings.Contains(body, wfRow(runningID)) || !strings.Contains(body, wfRow(failedID)) {
			t.Errorf("?state=failed: want only workflow %d:\n%s", failedID, body)
		}
		_, body = get(t, h, "/", http.StatusOK)
		if !strings.Contains(body, `href="./workflows"`) {
			t.Errorf("overview lacks the link to the workflows page")
		}
	})

	t.Run("workflow page", func(t *testing.T) {
		_, body := get(t, h, failedPath, http.StatusOK)
		states := map[string]string{"a": "completed", "b": "failed", "c": "completed", "d": "failed"}
		for step, state := range states {
			node := `<g class="wf-node wf-` + state + `" data-step="` + step + `" data-state="` + state + `">`
			if !strings.Contains(body, node) {
				t.Errorf("graph lacks the node %s", node)
			}
			job := done.Steps[step]
			queue := map[string]string{"a": "resize_image", "b": "send_email", "c": "resize_image", "d": "send_email"}[step]
			if link := `href="../queues/` + queue + `/jobs/` + strconv.FormatInt(job.JobID, 10) + `"`; !strings.Contains(body, link) {
				t.Errorf("page lacks the link %s to step %s's job", link, step)
			}
		}
		edges := regexp.MustCompile(`data-from="(\w)" data-to="(\w)"`).FindAllStringSubmatch(body, -1)
		var got []string
		for _, e := range edges {
			got = append(got, e[1]+">"+e[2])
		}
		if strings.Join(got, " ") != "a>b a>c b>d c>d" {
			t.Errorf("edges = %v, want a>b a>c b>d c>d", got)
		}
		if !strings.Contains(body, "smtp: &lt;b&gt;550&lt;/b&gt; &#34;mailbox&#34; &amp; more") || strings.Contains(body, "<b>550") {
			t.Errorf("step b's error is missing or not escaped:\n%s", body)
		}
		if !regexp.MustCompile(`<tr data-step="d">(?s:.*?)>cancelled</td>`).MatchString(body) {
			t.Errorf("step d is not shown cancelled:\n%s", body)
		}
		_, body = get(t, h, "/workflows/"+strconv.FormatInt(runningID, 10), http.StatusOK)
		for _, want := range []string{`data-step="a" data-state="pending"`, `data-step="d" data-state="waiting"`, `id="workflow-state" class="state state-running"`} {
			if !strings.Contains(body, want) {
				t.Errorf("running workflow's page lacks %q", want)
			}
		}
	})

	t.Run("job page", func(t *testing.T) {
		b := done.Steps["b"].JobID
		_, body := get(t, h, "/queues/send_email/jobs/"+strconv.FormatInt(b, 10), http.StatusOK)
		if want := `<a id="job-workflow" href="../../../workflows/` + strconv.FormatInt(failedID, 10) + `">`; !strings.Contains(body, want) {
			t.Errorf("job page of step b lacks %s", want)
		}
		_, body = get(t, h, "/queues/send_email/jobs/"+strconv.FormatInt(plain, 10), http.StatusOK)
		if strings.Contains(body, "job-workflow") {
			t.Errorf("job page of a job outside workflows links a workflow")
		}
	})

	t.Run("not found", func(t *testing.T) {
		get(t, h, "/workflows/"+strconv.FormatInt(runningID+1000, 10), http.StatusNotFound)
		get(t, h, "/workflows/x", http.StatusNotFound)
		get(t, h, "/workflows?name=nope", http.StatusNotFound)
		get(t, h, "/workflows?state=nope", http.StatusNotFound)
		none, err := New(Config{Queues: admins(pool), AllowedHosts: testHosts})
		if err != nil {
			t.Fatal(err)
		}
		get(t, none, "/workflows", http.StatusNotFound)
		if _, body := get(t, none, "/", http.StatusOK); strings.Contains(body, "workflows") {
			t.Errorf("a dashboard without workflows links them")
		}
	})

	t.Run("paging", func(t *testing.T) {
		paged, err := New(Config{Queues: admins(pool), Workflows: []skipjack.WorkflowAdmin{thumbnails.Admin(pool)}, PageSize: 1, AllowedHosts: testHosts})
		if err != nil {
			t.Fatal(err)
		}
		_, body := get(t, paged, "/workflows", http.StatusOK)
		older := `href="./workflows?before=` + strconv.FormatInt(runningID, 10) + `"`
		if !strings.Contains(body, wfRow(runningID)) || strings.Contains(body, wfRow(failedID)) || !strings.Contains(body, older) {
			t.Fatalf("first page: want workflow %d and a link %s:\n%s", runningID, older, body)
		}
		_, body = get(t, paged, "/workflows?before="+strconv.FormatInt(runningID, 10), http.StatusOK)
		newer := `href="./workflows?after=` + strconv.FormatInt(failedID, 10) + `"`
		if !strings.Contains(body, wfRow(failedID)) || !strings.Contains(body, newer) || strings.Contains(body, `id="page-older"`) {
			t.Fatalf("second page: want workflow %d, a link %s and none older:\n%s", failedID, newer, body)
		}
		_, body = get(t, paged, "/workflows?after="+strconv.FormatInt(failedID, 10), http.StatusOK)
		if !strings.Contains(body, wfRow(runningID)) || strings.Contains(body, `id="page-newer"`) {
			t.Fatalf("newer page: want workflow %d and no newer link:\n%s", runningID, body)
		}
	})
}

// get requests target from h and fails the test unless it answers status.
func get(t *testing.T, h http.Handler, target string, status int) (*http.Response, string) {
	t.Helper()
	res, body := do(t, h, httptest.NewRequest("GET", target, nil))
	if res.StatusCode != status {
		t.Fatalf("GET %s: status %d, want %d:\n%s", target, res.StatusCode, status, body)
	}
	return res, body
}
