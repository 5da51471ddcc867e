package main

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// latencyHist is a pickup-latency histogram of bounded memory: an HDR
// histogram from 1µs to 1h at 3 significant digits.
type latencyHist struct{ h *hdrhistogram.Histogram }

func newLatencyHist() *latencyHist {
	return &latencyHist{h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// record adds one latency; values outside the range are clamped to it.
func (l *latencyHist) record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), l.h.HighestTrackableValue())
	_ = l.h.RecordValue(us)
}

// quantile returns the q-quantile (0 for an empty histogram).
func (l *latencyHist) quantile(q float64) time.Duration {
	if l.h.TotalCount() == 0 {
		return 0
	}
	return time.Duration(l.h.ValueAtQuantile(q*100)) * time.Microsecond
}

// max returns the largest latency recorded.
func (l *latencyHist) max() time.Duration {
	return time.Duration(l.h.Max()) * time.Microsecond
}
