package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// statsParallelism bounds how many queues the overview asks at once, so a
// dashboard over many queues does not take a connection per queue.
const statsParallelism = 4

// queueRow is one line of the overview.
type queueRow struct {
	Name  string
	Stats skipjack.Stats
	// Completed counts the jobs completed in the last hour, as the
	// workers recorded them (so also where completed jobs are deleted at
	// ack). Failed counts the stored failed jobs that failed or were
	// cancelled in the last hour: each job once, whatever its attempts,
	// and a part of Stats.Failed.
	Completed, Failed int64
	// Activity is what the queue's workers recorded per minute over the
	// last day (activitySpan).
	Activity []skipjack.ActivityMinute
	// Err says why the figures are missing, or is "".
	Err string
}

// overviewData is the overview page's model.
type overviewData struct {
	Rows  []queueRow
	Total queueRow
	// Chart is the activity of all queues together.
	Chart chart
}

// overview serves the page of all queues.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request, seg []string) {
	rows, at := h.overviewRows(r.Context())
	d := overviewData{Rows: rows}
	rng, ok := rangeNamed(r.URL.Query().Get("range"))
	status := http.StatusOK
	if !ok {
		status = http.StatusBadRequest
	}
	acts := make([][]skipjack.ActivityMinute, 0, len(rows))
	for _, row := range rows {
		acts = append(acts, row.Activity)
	}
	d.Chart = newChart("all", sumActivity(acts...), rng, at)
	d.Chart.Ranges = rangeLinks(baseOf(seg), rng)
	for _, row := range rows {
		d.Total.Stats.Pending += row.Stats.Pending
		d.Total.Stats.Scheduled += row.Stats.Scheduled
		d.Total.Stats.Running += row.Stats.Running
		d.Total.Stats.Completed += row.Stats.Completed
		d.Total.Stats.Failed += row.Stats.Failed
		if !row.Stats.Paused {
			// A paused queue's jobs wait on purpose: its wait is shown
			// as paused, and not as the longest wait of all queues.
			d.Total.Stats.OldestPending = max(d.Total.Stats.OldestPending, row.Stats.OldestPending)
		}
		d.Total.Completed += row.Completed
		d.Total.Failed += row.Failed
	}
	p := h.newPage(seg, "Queues", at)
	p.Data = d
	h.render(w, r, status, "overview", p)
}

// overviewMaxAge is how long requests share the overview's figures: any
// number of open, auto-refreshing overviews cost the database at most one
// round of Stats and Finished per queue per overviewMaxAge.
const overviewMaxAge = time.Second

// sharedFigures are the overview's figures as of at, shared between
// requests. mu is held while they are read from the database, so that
// concurrent requests wait for one computation instead of each starting
// their own.
type sharedFigures struct {
	mu   sync.Mutex
	at   time.Time
	rows []queueRow
}

// overviewRows returns every queue's figures and the time they are as of:
// the shared ones while younger than overviewMaxAge, else fresh ones.
func (h *Handler) overviewRows(ctx context.Context) ([]queueRow, time.Time) {
	f := &h.figures
	f.mu.Lock()
	defer f.mu.Unlock()
	now := h.now()
	if age := now.Sub(f.at); f.rows != nil && age >= 0 && age < overviewMaxAge {
		return f.rows, f.at
	}
	// Other requests may be waiting for these figures: do not let this
	// request's cancellation fail them.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.QueryTimeout)
	defer cancel()
	rows := make([]queueRow, len(h.names))
	sem := make(chan struct{}, statsParallelism)
	var wg sync.WaitGroup
	for i, name := range h.names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i] = h.queueRow(ctx, name, now)
		})
	}
	wg.Wait()
	f.rows, f.at = rows, now
	return rows, now
}

// queueRow reads one queue's figures for the overview.
func (h *Handler) queueRow(ctx context.Context, name string, now time.Time) queueRow {
	q := h.queues[name]
	row := queueRow{Name: name}
	st, err := q.Stats(ctx)
	if err != nil {
		row.Err = h.failed(ctx, "stats", name, err)
		return row
	}
	row.Stats = st
	// Failed in the last hour: the stored failed jobs that finished in
	// it, as the Failed column counts stored failed jobs. (The workers'
	// records count failures as they happen: neither a pending job
	// cancelled by an operator nor only once a job retried and failed
	// again.)
	var completed int64
	completed, row.Failed, err = q.Finished(ctx, now.Add(-time.Hour))
	if err != nil {
		row.Err = h.failed(ctx, "finished", name, err)
		return row
	}
	in, ok := q.(skipjack.QueueInsights)
	if !ok {
		// No recorded activity: completions from the retained rows.
		row.Completed = completed
		return row
	}
	row.Activity, err = in.Activity(ctx, now.Add(-activitySpan))
	if err != nil {
		row.Err = h.failed(ctx, "activity", name, err)
		return row
	}
	row.Completed = sinceActivity(row.Activity, now.Add(-time.Hour)).Completed
	return row
}

// rangeLinks are the links from a page's charts to its other ranges: base
// (the page's own path relative to itself) with ?range=.
func rangeLinks(base string, current chartRange) []rangeLink {
	var links []rangeLink
	for i, r := range chartRanges {
		u := base
		if i > 0 {
			u += "?range=" + r.Name
		}
		links = append(links, rangeLink{Label: capitalize(strings.SplitN(r.Label, ",", 2)[0]), URL: u, Current: r.Name == current.Name})
	}
	return links
}

// failed logs a failed database call and returns the text to show for it.
func (h *Handler) failed(ctx context.Context, what, queue string, err error) string {
	h.log.ErrorContext(ctx, "dashboard: "+what+" failed", "queue", queue, "err", err)
	return fmt.Sprintf("%s of %s failed: %v", what, queue, err)
}
