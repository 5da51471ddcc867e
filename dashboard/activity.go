package dashboard

import (
	"slices"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// chartRange is a period the charts show: n buckets of step, ending with
// the bucket that holds now.
type chartRange struct {
	// Name is the ?range= value ("hour", "day").
	Name string
	// Label names the range in headings ("last hour").
	Label string
	// Step is one bucket (a bar or a point).
	Step time.Duration
	// N is how many buckets.
	N int
	// TickEvery is how many buckets apart the x axis is labelled.
	TickEvery int
	// TickFormat formats an x axis label.
	TickFormat string
}

// chartRanges are the ranges a page offers, the default first.
var chartRanges = []chartRange{
	{Name: "hour", Label: "last hour, per minute", Step: time.Minute, N: 60, TickEvery: 10, TickFormat: "15:04"},
	{Name: "day", Label: "last day, per hour", Step: time.Hour, N: 24, TickEvery: 4, TickFormat: "15:04"},
}

// rangeNamed returns the range called name, or the default and false.
func rangeNamed(name string) (chartRange, bool) {
	for _, r := range chartRanges {
		if r.Name == name {
			return r, true
		}
	}
	return chartRanges[0], name == ""
}

// activitySpan is how far back the activity a page reads goes: the longest
// range, with the bucket that is still filling.
var activitySpan = 25 * time.Hour

// bucket is one bar or point of a chart: the activity of one step.
type bucket struct {
	Start                      time.Time
	Completed, Failed, Retried int64
	Waits                      []int64
}

// bucketize sums per-minute activity into the n steps of r that end with
// the one holding now, oldest first.
func bucketize(mins []skipjack.ActivityMinute, r chartRange, now time.Time) []bucket {
	last := now.Truncate(r.Step)
	first := last.Add(-time.Duration(r.N-1) * r.Step)
	out := make([]bucket, r.N)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * r.Step)
	}
	for _, m := range mins {
		if m.Minute.Before(first) {
			continue
		}
		i := int(m.Minute.Sub(first) / r.Step)
		if i >= r.N {
			continue
		}
		b := &out[i]
		b.Completed += m.Completed
		b.Failed += m.Failed
		b.Retried += m.Retried
		b.Waits = skipjack.AddWaits(b.Waits, m.Waits)
	}
	return out
}

// sumActivity adds the per-minute activity of several queues, minute by
// minute, in minute order.
func sumActivity(lists ...[]skipjack.ActivityMinute) []skipjack.ActivityMinute {
	byMinute := map[int64]*skipjack.ActivityMinute{}
	var order []int64
	for _, l := range lists {
		for _, m := range l {
			k := m.Minute.Unix()
			s, ok := byMinute[k]
			if !ok {
				s = &skipjack.ActivityMinute{Minute: m.Minute}
				byMinute[k] = s
				order = append(order, k)
			}
			s.Completed += m.Completed
			s.Failed += m.Failed
			s.Retried += m.Retried
			s.Waits = skipjack.AddWaits(s.Waits, m.Waits)
		}
	}
	out := make([]skipjack.ActivityMinute, 0, len(order))
	slices.Sort(order)
	for _, k := range order {
		out = append(out, *byMinute[k])
	}
	return out
}

// totals sums the buckets of a chart.
func totals(bs []bucket) bucket {
	var t bucket
	for _, b := range bs {
		t.Completed += b.Completed
		t.Failed += b.Failed
		t.Retried += b.Retried
		t.Waits = skipjack.AddWaits(t.Waits, b.Waits)
	}
	return t
}

// sinceActivity returns the activity of mins at or after since.
func sinceActivity(mins []skipjack.ActivityMinute, since time.Time) bucket {
	var t bucket
	for _, m := range mins {
		if !m.Minute.Before(since) {
			t.Completed += m.Completed
			t.Failed += m.Failed
			t.Retried += m.Retried
			t.Waits = skipjack.AddWaits(t.Waits, m.Waits)
		}
	}
	return t
}
