package dashboard

import (
	"context"
	"fmt"
	"strings"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// limitRow is one line of a queue page's flow control table: a setting,
// its declared value, and its use now.
type limitRow struct {
	// Key names the row for scripts and tests (data-limit).
	Key     string
	Setting string
	Value   string
	InUse   string
}

// limitRows describes a queue's flow control, one row per setting it
// declares, or a single "none" row. Each setting is its own row so that
// another (a per-key limit, say) is one more append.
func limitRows(l skipjack.Limits) []limitRow {
	var rows []limitRow
	if l.Concurrency > 0 {
		rows = append(rows, limitRow{
			Key: "concurrency", Setting: "Concurrency",
			Value: fmt.Sprintf("at most %d jobs running at once, all processes together", l.Concurrency),
			InUse: fmt.Sprintf("%d of %d slots in use", l.Claimed, l.Concurrency),
		})
	}
	if l.RateCount > 0 {
		r := limitRow{
			Key: "rate", Setting: "Rate",
			Value: fmt.Sprintf("at most %d jobs started per %s, all processes together", l.RateCount, formatDuration(l.RatePer)),
			InUse: "room to start jobs now",
		}
		if l.RateWait > 0 {
			r.InUse = "window full: next start in " + formatDuration(l.RateWait)
		}
		rows = append(rows, r)
	}
	if l.PerKeyConcurrency > 0 {
		rows = append(rows, limitRow{
			Key: "per-key", Setting: "Per key",
			Value: fmt.Sprintf("at most %d jobs running at once per %s, all processes together", l.PerKeyConcurrency, strings.Join(l.PerKeyBy, ", ")),
			InUse: fmt.Sprintf("%d jobs claimed, all keys", l.Claimed),
		})
	}
	if l.Serial {
		r := limitRow{Key: "serial", Setting: "Serial", Value: "jobs with the same key run one at a time, in enqueue order", InUse: fmt.Sprintf("%d jobs claimed", l.Claimed)}
		if len(l.SerialBy) > 0 {
			r.Value = "jobs with the same " + strings.Join(l.SerialBy, ", ") + " run one at a time, in enqueue order"
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		rows = append(rows, limitRow{Key: "none", Setting: "None", Value: "no limits: as many jobs run as workers have handler slots", InUse: fmt.Sprintf("%d jobs claimed", l.Claimed)})
	}
	return rows
}

// queueLimits reads the flow control of q for its page: nil rows when q's
// admin cannot describe it, the error's text when the read failed.
func (h *Handler) queueLimits(ctx context.Context, q skipjack.QueueAdmin) ([]limitRow, string) {
	ql, ok := q.(skipjack.QueueLimiter)
	if !ok {
		return nil, ""
	}
	l, err := ql.Limits(ctx)
	if err != nil {
		return nil, h.failed(ctx, "limits", q.Name(), err)
	}
	return limitRows(l), ""
}
