package dashboard

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// The geometry of a chart's SVG, in viewBox units: the plot area lies
// inside the margins, the y axis labels left of it, the x axis labels
// below.
const (
	chartWidth  = 720
	chartHeight = 180
	plotLeft    = 52
	plotRight   = 8
	plotTop     = 10
	plotBottom  = 24
)

// tick is a labelled position on an axis.
type tick struct {
	Pos   float64
	Label string
}

// bar is one step of a throughput chart: completed jobs from the axis up,
// failed ones stacked on top.
type bar struct {
	Start                      time.Time
	Label                      string
	X, W                       float64
	OKY, OKH, BadY, BadH       float64
	Completed, Failed, Retried int64
	P50, P95                   string
	WaitX, WaitY50, WaitY95    float64
	HasWait, Over50, Over95    bool
}

// chart is the model of the charts of one range: throughput (stacked bars)
// and waits (p50 and p95 lines on a log scale), with their data as a table.
type chart struct {
	// ID prefixes the element ids of the chart.
	ID    string
	Range chartRange
	// Ranges link to the other ranges of the page.
	Ranges []rangeLink
	Bars   []bar
	// YTicks label the throughput axis; WaitTicks the wait axis.
	YTicks, WaitTicks, XTicks []tick
	// P50Lines and P95Lines are polyline point lists, one per run of
	// steps that have waits.
	P50Lines, P95Lines []string
	Total              bucket
	P50, P95           string
	Width, Height      int
	PlotLeft, PlotTop  float64
	PlotRight          float64
	PlotBottom         float64
	// Err says why the activity is missing, or is "".
	Err string
}

// rangeLink is a link to a chart range.
type rangeLink struct {
	Label   string
	URL     string
	Current bool
}

// newChart builds the charts of range r from per-minute activity.
func newChart(id string, mins []skipjack.ActivityMinute, r chartRange, now time.Time) chart {
	bs := bucketize(mins, r, now)
	c := chart{
		ID: id, Range: r, Total: totals(bs), Width: chartWidth, Height: chartHeight,
		PlotLeft: plotLeft, PlotTop: plotTop, PlotRight: chartWidth - plotRight, PlotBottom: chartHeight - plotBottom,
	}
	c.P50, c.P95 = quantileText(c.Total.Waits, 0.5), quantileText(c.Total.Waits, 0.95)
	plotW := float64(chartWidth - plotLeft - plotRight)
	plotH := float64(chartHeight - plotTop - plotBottom)
	var peak int64
	for _, b := range bs {
		peak = max(peak, b.Completed+b.Failed)
	}
	top := niceCeil(peak)
	step := plotW / float64(len(bs))
	y := func(v int64) float64 { return plotTop + plotH - plotH*float64(v)/float64(top) }
	waitLevels := len(skipjack.WaitBounds) + 1
	waitY := func(level int) float64 { return plotTop + plotH - plotH*float64(level)/float64(waitLevels-1) }
	var p50, p95 []string
	flush := func() {
		if len(p50) > 0 {
			c.P50Lines = append(c.P50Lines, strings.Join(p50, " "))
			c.P95Lines = append(c.P95Lines, strings.Join(p95, " "))
		}
		p50, p95 = nil, nil
	}
	for i, b := range bs {
		x := plotLeft + float64(i)*step
		v := bar{
			Start: b.Start, Label: b.Start.UTC().Format(r.TickFormat), X: x + step*0.1, W: step * 0.8,
			Completed: b.Completed, Failed: b.Failed, Retried: b.Retried,
		}
		v.OKY, v.BadY = y(b.Completed), y(b.Completed+b.Failed)
		v.OKH, v.BadH = y(0)-v.OKY, v.OKY-v.BadY
		if l50, o50, ok := waitLevel(b.Waits, 0.5); ok {
			l95, o95, _ := waitLevel(b.Waits, 0.95)
			v.HasWait, v.Over50, v.Over95 = true, o50, o95
			v.P50, v.P95 = quantileText(b.Waits, 0.5), quantileText(b.Waits, 0.95)
			v.WaitX, v.WaitY50, v.WaitY95 = x+step/2, waitY(l50), waitY(l95)
			p50 = append(p50, point(v.WaitX, v.WaitY50))
			p95 = append(p95, point(v.WaitX, v.WaitY95))
		} else {
			flush()
		}
		c.Bars = append(c.Bars, v)
		if i%r.TickEvery == 0 {
			c.XTicks = append(c.XTicks, tick{Pos: x + step/2, Label: v.Label})
		}
	}
	flush()
	for _, v := range []int64{0, top / 2, top} {
		c.YTicks = append(c.YTicks, tick{Pos: y(v), Label: strconv.FormatInt(v, 10)})
	}
	// Every third bound (1ms, 10ms, 100ms, 1s, 20s, 5m, 1h) labels the
	// wait axis; level i is the bucket below WaitBounds[i].
	for i := 0; i < len(skipjack.WaitBounds); i += 3 {
		c.WaitTicks = append(c.WaitTicks, tick{Pos: waitY(i), Label: formatDuration(skipjack.WaitBounds[i])})
	}
	return c
}

// waitLevel returns the bucket index of the q-quantile of waits.
func waitLevel(waits []int64, q float64) (level int, over, ok bool) {
	d, over, ok := skipjack.WaitQuantile(waits, q)
	if !ok {
		return 0, false, false
	}
	if over {
		return len(skipjack.WaitBounds), true, true
	}
	for i, b := range skipjack.WaitBounds {
		if d == b {
			return i, false, true
		}
	}
	return 0, false, true
}

// quantileText says a wait quantile as "≤ 50ms", "≥ 1h", or "–" when
// nothing was recorded.
func quantileText(waits []int64, q float64) string {
	d, over, ok := skipjack.WaitQuantile(waits, q)
	switch {
	case !ok:
		return "–"
	case over:
		return "≥ " + formatDuration(d)
	}
	return "≤ " + formatDuration(d)
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 1), so
// an axis ends at a round number.
func niceCeil(n int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
	}
}

// point formats an SVG polyline point.
func point(x, y float64) string { return fmt.Sprintf("%.1f,%.1f", x, y) }
