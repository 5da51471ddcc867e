package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
}

// CronSchedule builds a cron schedule from the expression and time zone
// the generator validated, parsed by parse (the generated package passes
// robfig/cron's ParseStandard, so the runtime links no cron library).
func CronSchedule[S interface{ Next(time.Time) time.Time }](index int, expr, timezone string, parse func(string) (S, error), payload, missed string) Schedule {
	s := Schedule{Index: index, Payload: payload, Missed: missed}
	sched, err := parse("CRON_TZ=" + timezone + " " + expr)
	if err != nil {
		s.Err = fmt.Errorf("schedule %d (%q in %s): %w", index, expr, timezone, err)
		return s
	}
	s.Next = sched.Next
	return s
}

// EverySchedule builds an "@every d" schedule.
func EverySchedule(index int, every time.Duration, payload, missed string) Schedule {
	return Schedule{Index: index, Every: every, Payload: payload, Missed: missed}
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
	// Walk forward from a year back; cron slots are at least a minute
	// apart, and descriptors like @yearly have one slot a year.
	var last time.Time
	for at := s.Next(t.AddDate(-1, 0, -1)); !at.After(t) && !at.IsZero(); at = s.Next(at) {
		last = at
	}
	return last
}

// slotGrace is how late a process may be for a slot and still insert it
// under missed: skip, so that a worker restarted by a deploy right at a
// slot's instant does not skip it.
const slotGrace = time.Minute

// scheduleLoop inserts the job of every due slot of the queue's schedules
// until stop is closed. Every worker of the queue runs it; the slots table
// lets exactly one insert per slot win.
func (r *runner[T]) scheduleLoop(stop <-chan struct{}) {
	type state struct {
		s    Schedule
		next time.Time
	}
	var states []*state
	now := time.Now()
	for _, s := range r.spec.Schedules {
		if s.Err != nil {
			r.log.Error("skipjack: periodic job disabled", "error", s.Err)
			continue
		}
		st := &state{s: s}
		latest := s.latest(now)
		switch {
		case latest.IsZero():
			st.next = s.after(now)
		case now.Sub(latest) < slotGrace:
			st.next = latest
		case s.Missed == "once":
			r.insertMissed(s, latest)
			st.next = s.after(now)
		default:
			st.next = s.after(now)
		}
		states = append(states, st)
	}
	if len(states) == 0 {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		soonest := states[0].next
		for _, st := range states[1:] {
			if st.next.Before(soonest) {
				soonest = st.next
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
			if st.next.After(now) {
				continue
			}
			if err := r.insertSlot(st.s, st.next); err != nil {
				r.log.Warn("skipjack: inserting a periodic job failed; another worker may insert it, else it is retried", "error", err, "slot", st.next)
				st.next = now.Add(time.Second)
				if latest := st.s.latest(now); !latest.Equal(st.next) && now.Sub(latest) >= slotGrace {
					st.next = st.s.after(now)
				}
				continue
			}
			st.next = st.s.after(st.next)
			if st.next.Before(now) { // the process slept through slots
				st.next = st.s.after(now)
			}
		}
	}
}

// insertMissed inserts one job for the slots missed since the schedule's
// last inserted slot, under missed: once.
func (r *runner[T]) insertMissed(s Schedule, latest time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	last, err := r.w.slots.LastSlot(ctx, int32(s.Index))
	cancel()
	if errors.Is(err, pgx.ErrNoRows) {
		return // never ran: nothing was missed
	}
	if err != nil {
		r.log.Warn("skipjack: reading a schedule's last slot failed", "error", err)
		return
	}
	if last.Before(latest) {
		if err := r.insertSlot(s, latest); err != nil {
			r.log.Warn("skipjack: inserting a missed periodic job failed", "error", err)
		}
	}
}

// insertSlot inserts the job of one slot unless another process did.
func (r *runner[T]) insertSlot(s Schedule, slot time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	id, err := r.w.slots.EnqueueSlot(ctx, s.Payload, int32(s.Index), slot)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // another process inserted this slot
	}
	if err != nil {
		return fmt.Errorf("periodic %s slot %s: %w", r.spec.Name, slot.Format(time.RFC3339), err)
	}
	r.log.Debug("skipjack: inserted periodic job", "job_id", id, "slot", slot)
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
