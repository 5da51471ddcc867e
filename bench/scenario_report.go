package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// writeScenarioReport prints the per-phase table and the targets to out and
// writes summary.md, summary.json and the SVG plots to the output folder.
func writeScenarioReport(o scenarioOptions, results []*systemResult, out io.Writer) error {
	var b strings.Builder
	writeScenarioTable(&b, o, results)
	fmt.Fprint(out, b.String())
	if err := os.WriteFile(filepath.Join(o.outDir, "summary.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.outDir, "summary.json"), j, 0o644); err != nil {
		return err
	}
	plots := []struct {
		file, title string
		logY        bool
		y           func(scenarioSample) float64
	}{
		{"completed.svg", "completed jobs/s", false, func(s scenarioSample) float64 { return float64(s.Completed) }},
		{"enqueued.svg", "enqueued jobs/s", false, func(s scenarioSample) float64 { return float64(s.Enqueued) }},
		{"pickup-p99.svg", "pickup p99 ms (jobs picked up in that second, log scale)", true, func(s scenarioSample) float64 { return s.P99ms }},
		{"backlog.svg", "backlog (enqueued, not yet completed)", false, func(s scenarioSample) float64 { return float64(s.Backlog) }},
		{"dead-tuples.svg", "dead tuples of the queue table", false, func(s scenarioSample) float64 { return float64(s.Dead) }},
	}
	for _, p := range plots {
		svg := plotSVG(p.title, results, p.y, p.logY)
		if err := os.WriteFile(filepath.Join(o.outDir, p.file), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeScenarioTable(w io.Writer, o scenarioOptions, results []*systemResult) {
	load := "load average at the end " + loadAvg()
	if o.reportFrom != "" {
		load = "rewritten from " + o.reportFrom + " (the load averages are in samples.jsonl)"
	}
	fmt.Fprintf(w, "\nScenarios: %d producers at %d single-row enqueues/s (high-load: 1.5x the capacity phase's completed/s), handler = insert into an effects table + CompleteTx in one transaction; worker process pool %d connections; %s\n\n",
		o.producers, o.rate, o.conns, load)
	fmt.Fprintln(w, "| # | phase | system | s | target/s | enqueued/s | completed/s | pickup p50 ms | p95 ms | p99 ms | max ms | backlog at end | backlog ≤ 1 s after (s) | resume after fault (ms) | dead tuples | table+index MB | claim buffers per job | jobs per claim | top wait events (samples) | lost | run twice | note |")
	fmt.Fprintln(w, "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|---|")
	for i := range o.phases {
		for _, r := range results {
			if i >= len(r.Phases) {
				continue
			}
			p := r.Phases[i]
			target := fmt.Sprint(p.Target)
			if p.Target == 0 {
				target = "max"
			}
			bufs, per := "–", "–"
			if p.ClaimedJobs > 0 {
				bufs = fmt.Sprintf("%.1f", float64(p.ClaimBufs)/float64(p.ClaimedJobs))
				per = fmt.Sprintf("%.1f", float64(p.ClaimedJobs)/float64(p.Claims))
			}
			fmt.Fprintf(w, "| %d | %s | %s | %.0f | %s | %.0f | %.0f | %s | %s | %s | %s | %d | %s | %s | %d | %.1f | %s | %s | %s | %d | %d | %s |\n",
				i, p.Name, r.System, p.Seconds, target, float64(p.Enqueued)/p.Seconds, float64(p.Completed)/p.Seconds,
				fmtMs(p.P50ms), fmtMs(p.P95ms), fmtMs(p.P99ms), fmtMs(p.MaxMs), p.Backlog, orDash(p.DrainS, "%.0f"), orDash(p.ResumeMs, "%.0f"),
				p.DeadTuples, float64(p.TableBytes+p.IndexBytes)/(1<<20), bufs, per, topWaits(p.Waits, 3), p.Lost, p.Twice, p.Note)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | enqueued | enqueue errors | lost | run twice | failed | enqueues that failed yet ran | unfinished after drain | handler errors (retried) | final drain s |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f |\n",
			r.System, r.Enqueued, r.EnqueueErrs, r.Lost, r.Twice, r.Failed, r.Ambiguous, r.Unfinished, r.HandlerErrs, r.DrainTook)
	}
	fmt.Fprintln(w)
	writeLongPhases(w, o, results)
	writeTargets(w, o, results)
}

// writeLongPhases shows phases of 2 minutes or more minute by minute, from
// the per-second samples: a pinned horizon's cost grows with its age.
func writeLongPhases(w io.Writer, o scenarioOptions, results []*systemResult) {
	header := false
	for i, ph := range o.phases {
		if ph.dur < 2*time.Minute {
			continue
		}
		if !header {
			fmt.Fprintln(w, "Long phases minute by minute (medians of the per-second samples):")
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| # | phase | system | minute | enqueued/s | completed/s | pickup p50 ms | p99 ms | backlog at end | dead tuples at end | index MB at end |")
			fmt.Fprintln(w, "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
			header = true
		}
		for _, r := range results {
			var in []scenarioSample
			for _, s := range r.Samples {
				if s.PhaseIndex == i {
					in = append(in, s)
				}
			}
			for m := 0; m*60 < len(in); m++ {
				seg := in[m*60 : min(len(in), (m+1)*60)]
				med := func(f func(scenarioSample) float64) float64 {
					xs := make([]float64, len(seg))
					for j, s := range seg {
						xs[j] = f(s)
					}
					return median(xs)
				}
				last := seg[len(seg)-1]
				fmt.Fprintf(w, "| %d | %s | %s | %d | %.0f | %.0f | %s | %s | %d | %d | %.1f |\n", i, ph.name, r.System, m+1,
					med(func(s scenarioSample) float64 { return float64(s.Enqueued) }),
					med(func(s scenarioSample) float64 { return float64(s.Completed) }),
					fmtMs(med(func(s scenarioSample) float64 { return s.P50ms })),
					fmtMs(med(func(s scenarioSample) float64 { return s.P99ms })),
					last.Backlog, last.Dead, float64(last.IndexBytes)/(1<<20))
			}
		}
	}
	if header {
		fmt.Fprintln(w)
	}
}

// writeTargets checks issue 42's targets against one run's figures.
func writeTargets(w io.Writer, o scenarioOptions, results []*systemResult) {
	fmt.Fprintln(w, "Targets (issue 42):")
	for _, r := range results {
		var lines []string
		check := func(ok bool, format string, args ...any) {
			mark := "MET"
			if !ok {
				mark = "NOT MET"
			}
			lines = append(lines, fmt.Sprintf("  - %s: %s", mark, fmt.Sprintf(format, args...)))
		}
		var capacity float64
		for i, p := range r.Phases {
			next := func(name string) *phaseResult {
				if i+1 < len(r.Phases) && r.Phases[i+1].Name == name {
					return r.Phases[i+1]
				}
				return nil
			}
			switch p.Name {
			case phCapacity:
				capacity = float64(p.Completed) / p.Seconds
			case phIdleInTx, phReaders:
				check(float64(p.Completed) >= 0.95*float64(p.Enqueued), "%s (phase %d): completed %d ≥ 0.95 × enqueued %d", p.Name, i, p.Completed, p.Enqueued)
				check(p.P99ms <= 250, "%s (phase %d): pickup p99 %.0f ms ≤ 250 ms", p.Name, i, p.P99ms)
				if rec := next(phRecovery); rec != nil {
					check(rec.DrainS >= 0 && rec.DrainS <= 30, "%s (phase %d): backlog ≤ 1 s of enqueues within 30 s of recovery (%s s)", p.Name, i, orDash(rec.DrainS, "%.0f"))
				}
			case phHighLoad:
				if capacity > 0 {
					got := float64(p.Completed) / p.Seconds
					check(got >= 0.9*capacity, "high-load (phase %d): completed %.0f/s within 10%% of the capacity phase's %.0f/s (%.2f×)", i, got, capacity, got/capacity)
				}
				if rec := next(phRecovery); rec != nil {
					check(rec.DrainS >= 0, "high-load (phase %d): the backlog drains in recovery (%s s)", i, orDash(rec.DrainS, "%.0f"))
				}
			case phBackendKill, phPoolExhaust, phPGRestart, phStartWorker:
				check(p.ResumeMs >= 0 && p.ResumeMs <= 2000, "%s (phase %d): completions resume within 2 s of the fault's end (%s ms)", p.Name, i, orDash(p.ResumeMs, "%.0f"))
			}
		}
		check(r.Lost == 0 && r.Unfinished == 0, "0 lost (%d lost, %d unfinished after the drain)", r.Lost, r.Unfinished)
		check(r.Twice == 0, "every effect committed exactly once (%d run twice)", r.Twice)
		check(r.Failed == 0, "nothing failed (%d failed jobs; handlers failed %d times, retried)", r.Failed, r.HandlerErrs)
		fmt.Fprintf(w, "- %s\n%s\n", r.System, strings.Join(lines, "\n"))
	}
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v < 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func orDash(v float64, format string) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// topWaits returns the n most sampled wait events.
func topWaits(m map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var xs []kv
	for k, v := range m {
		xs = append(xs, kv{k, v})
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var parts []string
	for i, x := range xs {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", x.k, x.v))
	}
	return strings.Join(parts, ", ")
}

// plotColors are the systems' line colours, in table order.
var plotColors = []string{"#1f77b4", "#2ca02c", "#d62728", "#9467bd"}

// plotSVG draws one figure of every system over time (seconds since the
// system's first phase) as an SVG line chart, with the first system's
// phase boundaries as labelled vertical lines.
func plotSVG(title string, results []*systemResult, y func(scenarioSample) float64, logY bool) string {
	const W, H, left, right, top, bottom = 1100.0, 420.0, 70.0, 20.0, 40.0, 60.0
	var xmax, ymax float64
	ymin := math.Inf(1)
	for _, r := range results {
		for _, s := range r.Samples {
			xmax = math.Max(xmax, s.T)
			v := y(s)
			ymax = math.Max(ymax, v)
			if v > 0 {
				ymin = math.Min(ymin, v)
			}
		}
	}
	if xmax == 0 {
		xmax = 1
	}
	if ymax == 0 {
		ymax = 1
	}
	if logY {
		ymin = math.Pow(10, math.Floor(math.Log10(math.Max(ymin, 0.1))))
		if math.IsInf(ymin, 0) || ymin <= 0 {
			ymin = 0.1
		}
		ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
	} else {
		ymin = 0
		ymax *= 1.05
	}
	px := func(x float64) float64 { return left + x/xmax*(W-left-right) }
	py := func(v float64) float64 {
		f := v / ymax
		if logY {
			v = math.Max(v, ymin)
			f = (math.Log10(v) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return H - bottom - f*(H-top-bottom)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	// Axes and y grid.
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, H-bottom, W-right, H-bottom)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, H-bottom)
	var ticks []float64
	if logY {
		for v := ymin; v <= ymax*1.001; v *= 10 {
			ticks = append(ticks, v)
		}
	} else {
		step := niceStep(ymax / 5)
		for v := 0.0; v <= ymax; v += step {
			ticks = append(ticks, v)
		}
	}
	for _, v := range ticks {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, py(v), W-right, py(v), left-4, py(v)+4, shortNum(v))
	}
	for x := 0.0; x <= xmax; x += niceStep(xmax / 10) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0f s</text>`+"\n", px(x), H-bottom+14, x)
	}
	// Phase boundaries of the first system (the others' differ by their
	// start-up only).
	if len(results) > 0 && len(results[0].Samples) > 0 {
		prev := -1
		for _, s := range results[0].Samples {
			if s.PhaseIndex != prev {
				prev = s.PhaseIndex
				x := px(s.T)
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#999" stroke-dasharray="3,3"/>`, x, top, x, H-bottom)
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" transform="rotate(45 %.1f %.0f)" fill="#555">%s</text>`+"\n", x+2, H-bottom+24, x+2, H-bottom+24, html.EscapeString(s.Phase))
			}
		}
	}
	for i, r := range results {
		color := plotColors[i%len(plotColors)]
		var pts []string
		for _, s := range r.Samples {
			v := y(s)
			if logY && v <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.T), py(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="3" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			W-right-170, top+4+float64(i)*14, color, W-right-154, top+9+float64(i)*14, html.EscapeString(r.System))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// rewriteScenarioReport rewrites the summary and the plots of the run in
// o.reportFrom from its summary.json and samples.jsonl.
func rewriteScenarioReport(o scenarioOptions, out io.Writer) error {
	data, err := os.ReadFile(filepath.Join(o.reportFrom, "summary.json"))
	if err != nil {
		return err
	}
	var results []*systemResult
	if err := json.Unmarshal(data, &results); err != nil {
		return fmt.Errorf("read summary.json: %w", err)
	}
	f, err := os.Open(filepath.Join(o.reportFrom, "samples.jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s scenarioSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("read samples.jsonl: %w", err)
		}
		for _, r := range results {
			if r.System == s.System {
				r.Samples = append(r.Samples, s)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(results) == 0 {
		return errors.New("summary.json lists no system")
	}
	o.phases = nil
	for _, p := range results[0].Phases {
		o.phases = append(o.phases, phaseSpec{name: p.Name, dur: time.Duration(p.Seconds * float64(time.Second))})
	}
	o.outDir = o.reportFrom
	return writeScenarioReport(o, results, out)
}
