package skipjackimpl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// Schedule is one periodic job of a queue. Its slots are the same in every
// process: cron slots by the calendar in the schedule's time zone, "@every
// d" slots at whole multiples of d since the Unix epoch.
type Schedule struct {
	// Index is the schedule's position in the YAML, its key in the slots
	// table.
	Index int
	// Every is the interval of an "@every d" schedule; 0 for cron.
	Every time.Duration
	// Next returns the first cron slot strictly after t; nil for @every.
	Next func(t time.Time) time.Time
	// Err is why the cron expression could not be parsed at start (a
	// missing time zone database, say); the schedule is then skipped and
	// the error logged.
	Err error
	// Payload is the job's payload as JSON, checked by the generator.
	Payload string
	// Missed is "skip" (after downtime only the next slot runs) or "once"
	// (one job runs for the missed slots).
	Missed string
	// Spec is the schedule as the YAML writes it ("0 6 * * 1", "@every
	// 30s") and Timezone the zone its cron fields are read in, for
	// display.
	Spec, Timezone string
}

// CronSchedule builds a cron schedule from the expression and time zone
// the generator validated, parsed by parse (the generated package passes
// robfig/cron's ParseStandard, so the runtime links no cron library).
//
// The expression describes wall-clock times in the time zone, and each
// wall-clock time is one slot, across daylight-saving changes too: a time
// the clock skips (02:30 on the night it springs forward) runs as much
// later as the clock jumped (03:30), and a time the clock passes twice
// (01:30 on the night it falls back) runs once, at its first occurrence.
func CronSchedule[S interface{ Next(time.Time) time.Time }](index int, expr, timezone string, parse func(string) (S, error), payload, missed string) Schedule {
	s := Schedule{Index: index, Payload: payload, Missed: missed, Spec: expr, Timezone: timezone}
	loc, err := time.LoadLocation(timezone)
	if err != nil {
		s.Err = fmt.Errorf("schedule %d (%q in %s): %w", index, expr, timezone, err)
		return s
	}
	// Evaluated on a floating wall clock (UTC has no daylight saving),
	// then placed in the time zone.
	sched, err := parse("CRON_TZ=UTC " + expr)
	if err != nil {
		s.Err = fmt.Errorf("schedule %d (%q in %s): %w", index, expr, timezone, err)
		return s
	}
	s.Next = wallClockNext(sched.Next, loc)
	return s
}

// wallClockNext returns the Next of a schedule whose floating wall-clock
// slots (computed in UTC by next) are wall-clock times in loc.
func wallClockNext(next func(time.Time) time.Time, loc *time.Location) func(time.Time) time.Time {
	return func(t time.Time) time.Time {
		w := floating(t.In(loc))
		for range 1000 { // a slot a year at least: a few steps
			if w = next(w); w.IsZero() {
				return w
			}
			if at := inZone(w, loc); at.After(t) {
				return at
			}
		}
		return time.Time{}
	}
}

// floating returns the wall-clock time of t as the same reading in UTC.
func floating(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// inZone returns the instant at which loc's clocks read the floating
// wall-clock time w: the first one when they read it twice, and the
// reading shifted by the jump when they skip it.
func inZone(w time.Time, loc *time.Location) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	if floating(at).Equal(w) {
		// Go picks one of two readings of a repeated time; the first is
		// the one an hour (or the size of the change) earlier, if it
		// reads the same.
		for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
			if earlier := at.Add(-back); floating(earlier.In(loc)).Equal(w) {
				return earlier
			}
		}
		return at
	}
	// A skipped time: Go reads it with the offset before the change; move
	// it by the size of the change, to the same distance past the jump.
	_, before := at.Zone()
	_, after := at.Add(24 * time.Hour).Zone()
	return at.Add(time.Duration(after-before) * time.Second)
}

// EverySchedule builds an "@every d" schedule.
func EverySchedule(index int, every time.Duration, payload, missed string) Schedule {
	return Schedule{Index: index, Every: every, Payload: payload, Missed: missed, Spec: "@every " + every.String(), Timezone: "UTC"}
}

// NextSlots returns the first n slots of s after t (fewer when a cron
// schedule has no more), or none when s could not be parsed.
func (s Schedule) NextSlots(t time.Time, n int) []time.Time {
	if s.Err != nil {
		return nil
	}
	var out []time.Time
	for range n {
		if t = s.after(t); t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// Info describes s for the dashboard: its spec, payload, the last slot
// inserted (last, or zero when none) and the next n slots after now.
func (s Schedule) Info(last, now time.Time, n int) skipjack.ScheduleInfo {
	info := skipjack.ScheduleInfo{
		Spec: s.Spec, Timezone: s.Timezone, Payload: json.RawMessage(s.Payload), Missed: s.Missed,
		Next: s.NextSlots(now, n),
	}
	if !last.IsZero() {
		info.Last = &last
	}
	if s.Err != nil {
		info.Err = s.Err.Error()
	}
	return info
}

// after returns the first slot strictly after t.
func (s Schedule) after(t time.Time) time.Time {
	if s.Every > 0 {
		return epochFloor(t, s.Every).Add(s.Every)
	}
	return s.Next(t)
}

// latest returns the last slot at or before t, or the zero time when it
// cannot tell (a cron schedule with no slot in the previous year).
func (s Schedule) latest(t time.Time) time.Time {
	if s.Every > 0 {
		return epochFloor(t, s.Every)
	}
	// Walk forward from ever further back until a window holds a slot: the
	// last slot of the first such window is the latest. Cron slots are at
	// least a minute apart, and @yearly has one a year, so each walk is a
	// few steps.
	for _, back := range []time.Duration{2 * time.Minute, 2 * time.Hour, 49 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		var last time.Time
		for at := s.Next(t.Add(-back)); !at.After(t) && !at.IsZero(); at = s.Next(at) {
			last = at
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}

// slotGrace is how late a process may be for a slot and still insert it,
// so that a worker restarted by a deploy right at a slot's instant does not
// skip it.
const slotGrace = time.Minute

// slotRetry is how soon a failed insert of a slot is tried again.
const slotRetry = time.Second

// first returns the first slot a process starting at t inserts: the latest
// slot if it is less than slotGrace old, else the next one.
func (s Schedule) first(t time.Time) time.Time {
	if latest := s.latest(t); !latest.IsZero() && t.Sub(latest) < slotGrace {
		return latest
	}
	return s.after(t)
}

// scheduleLoop inserts the job of every due slot of the queue's schedules
// until stop is closed. Every worker of the queue runs it; the slots table
// lets exactly one insert per slot win.
func (m *maintainer) scheduleLoop(stop <-chan struct{}) {
	type state struct {
		s    Schedule
		slot time.Time // the next slot to insert
		at   time.Time // when to insert it: its instant, or a retry
	}
	var states []*state
	now := time.Now()
	for _, s := range m.spec.Schedules {
		if s.Err != nil {
			m.log.Error("skipjack: periodic job disabled", "error", s.Err)
			continue
		}
		first := s.first(now)
		if s.Missed == "once" {
			m.insertMissed(s, first)
		}
		states = append(states, &state{s: s, slot: first, at: first})
	}
	if len(states) == 0 {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		soonest := states[0].at
		for _, st := range states[1:] {
			if st.at.Before(soonest) {
				soonest = st.at
			}
		}
		timer.Reset(time.Until(soonest))
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		now := time.Now()
		for _, st := range states {
			if st.at.After(now) {
				continue
			}
			if err := m.insertSlot(st.s, st.slot); err != nil {
				m.log.Warn("skipjack: inserting a periodic job failed; another worker may insert it, else it is retried", "error", err, "slot", st.slot)
				// Retry the same slot, or the newest one once it is due:
				// the slots table never takes an older slot after it.
				if latest := st.s.latest(now); latest.After(st.slot) {
					st.slot = latest
				}
				st.at = now.Add(slotRetry)
				continue
			}
			st.slot = st.s.after(st.slot)
			// A process that was late by less than slotGrace (a GC pause,
			// a starved CPU) catches up slot by slot; later than that it
			// is treated as after downtime.
			if now.Sub(st.slot) >= slotGrace {
				st.slot = st.s.first(now)
			}
			st.at = st.slot
		}
	}
}

// insertMissed inserts one job for the slots missed before first, the
// first slot this process inserts, since the schedule's last inserted
// slot, under missed: once. Its run_at is the last missed slot.
func (m *maintainer) insertMissed(s Schedule, first time.Time) {
	missed := s.latest(first.Add(-time.Nanosecond))
	if missed.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	last, err := m.slots.LastSlot(ctx, int32(s.Index))
	cancel()
	if errors.Is(err, pgx.ErrNoRows) {
		return // never ran: nothing was missed
	}
	if err != nil {
		m.log.Warn("skipjack: reading a schedule's last slot failed", "error", err)
		return
	}
	if last.Before(missed) {
		if err := m.insertSlot(s, missed); err != nil {
			m.log.Warn("skipjack: inserting a missed periodic job failed", "error", err)
		}
	}
}

// insertSlot inserts the job of one slot unless another process did.
func (m *maintainer) insertSlot(s Schedule, slot time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	id, err := m.slots.EnqueueSlot(ctx, s.Payload, int32(s.Index), slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // another process inserted this slot
	}
	if err != nil {
		return fmt.Errorf("periodic %s slot %s: %w", m.spec.Name, slot.Format(time.RFC3339), err)
	}
	m.log.Debug("skipjack: inserted periodic job", "job_id", id, "slot", slot)
	return nil
}

// epochFloor returns the last whole multiple of d since the Unix epoch at
// or before t (time.Truncate counts from year 1 instead).
func epochFloor(t time.Time, d time.Duration) time.Time {
	ns := t.UnixNano()
	rem := ns % int64(d)
	if rem < 0 {
		rem += int64(d)
	}
	return time.Unix(0, ns-rem)
}
