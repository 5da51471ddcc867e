package main

import (
	"fmt"
	"io"
)

// printTable prints the main table as Markdown, with the median of each
// figure and ratios to River (tuned), then the targets.
func printTable(out io.Writer, o options, rows []*row) {
	fmt.Fprintf(out, "\n%d jobs per burn-down, bulk enqueue in batches of %d, latency at %d jobs/s single inserts for %v (after %v warm-up); median of %d run(s)\n\n",
		o.jobs, o.batch, o.rate, o.latency, o.warmup, o.runs)
	ref := find(rows, "river-tuned")
	def := find(rows, "river-default")
	fmt.Fprintln(out, "| system | retention | enqueue jobs/s | ×River tuned | burn-down jobs/s | ×River tuned | ×River default | worker CPU µs/job | server CPU µs/job | p50 ms | p95 ms | p99 ms | p99 ×River tuned |")
	fmt.Fprintln(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rows {
		enq, burn := median(r.enqueue), median(r.burn)
		p50, p95, p99 := median(r.p50), median(r.p95), median(r.p99)
		name := r.sys.name
		if len(r.errs) > 0 {
			name += fmt.Sprintf(" (%d failed)", len(r.errs))
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			name, r.sys.retention,
			num(enq), ratio(enq, ref, func(r *row) []float64 { return r.enqueue }),
			num(burn), ratio(burn, ref, func(r *row) []float64 { return r.burn }),
			ratio(burn, def, func(r *row) []float64 { return r.burn }),
			us(median(r.workerCPU)), us(median(r.serverCPU)),
			ms(p50), ms(p95), ms(p99),
			ratio(p99, ref, func(r *row) []float64 { return r.p99 }))
	}
	fmt.Fprintln(out)
	printTargets(out, rows)
}

func find(rows []*row, name string) *row {
	for _, r := range rows {
		if r.sys.name == name {
			return r
		}
	}
	return nil
}

func num(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func us(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

func ms(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// ratio formats v divided by the median of ref's figure.
func ratio(v float64, ref *row, figure func(*row) []float64) string {
	if ref == nil || v == 0 {
		return "–"
	}
	d := median(figure(ref))
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v/d)
}

// printTargets checks the targets of issue 5 that the main table measures.
func printTargets(out io.Writer, rows []*row) {
	sjd, sjt := find(rows, "skipjack-default"), find(rows, "skipjack-tuned")
	rt, rd := find(rows, "river-tuned"), find(rows, "river-default")
	type target struct {
		name      string
		got, want float64
		lower     bool // lower is better (latency)
		unit      string
	}
	var ts []target
	if sjt != nil && rt != nil {
		ts = append(ts, target{"skipjack-tuned burn-down ≥ 3× river-tuned", median(sjt.burn) / median(rt.burn), 3, false, "×"})
		ts = append(ts, target{"skipjack-tuned bulk enqueue ≥ 1.5× river-tuned", median(sjt.enqueue) / median(rt.enqueue), 1.5, false, "×"})
	}
	if sjt != nil && rd != nil {
		ts = append(ts, target{"skipjack-tuned burn-down ≥ 20× river-default", median(sjt.burn) / median(rd.burn), 20, false, "×"})
	}
	if sjd != nil && rt != nil {
		ts = append(ts, target{"skipjack-default p99 ≤ river-tuned p99", median(sjd.p99), median(rt.p99), true, " ms"})
	}
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(out, "Targets (issue 5):")
	for _, t := range ts {
		ok := t.got >= t.want
		if t.lower {
			ok = t.got > 0 && t.got <= t.want
		}
		verdict := "MET"
		if !ok {
			verdict = "MISSED"
		}
		fmt.Fprintf(out, "- %s: %s (got %.2f%s, want %s %.2f%s)\n", t.name, verdict, t.got, t.unit, map[bool]string{true: "≤", false: "≥"}[t.lower], t.want, t.unit)
	}
	fmt.Fprintln(out)
}
