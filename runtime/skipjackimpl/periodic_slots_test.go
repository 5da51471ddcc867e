package skipjackimpl

import (
	"errors"
	"testing"
	"time"
)

// cronFunc is a cron schedule written with the standard library, for
// CronSchedule's parse function.
type cronFunc func(time.Time) time.Time

func (f cronFunc) Next(t time.Time) time.Time { return f(t) }

// dailyAt returns the schedule "every day at hh:mm in loc".
func dailyAt(hour, minute int, loc *time.Location) cronFunc {
	return func(t time.Time) time.Time {
		t = t.In(loc)
		at := time.Date(t.Year(), t.Month(), t.Day(), hour, minute, 0, 0, loc)
		if !at.After(t) {
			at = at.AddDate(0, 0, 1)
		}
		return at
	}
}

// yearly returns the schedule "every 1 January at midnight UTC".
func yearly(t time.Time) time.Time {
	t = t.UTC()
	at := time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	if !at.After(t) {
		at = at.AddDate(1, 0, 0)
	}
	return at
}

// TestScheduleSlots checks, for cron and "@every" schedules, the three
// slots the periodic loop is built on, at instants chosen around slots:
// latest (the last slot at or before t), after (the first slot strictly
// after t) and first (the slot a worker starting at t inserts first: the
// latest one if it is less than a minute old, else the next). A daily
// cron must insert 06:00 at 06:00, not a day later, and a worker started
// at 06:00:30 still inserts 06:00.
//
// Kills periodic-no-start-grace, periodic-every-slot-shifted and
// periodic-cron-latest-one-late.
func TestScheduleSlots(t *testing.T) {
	t.Parallel()
	berlin := time.FixedZone("CET", 3600)
	day := func(d, h, m, s int) time.Time { return time.Date(2026, 12, d, h, m, s, 0, berlin) }
	parse := func(want string, c cronFunc) func(string) (cronFunc, error) {
		return func(spec string) (cronFunc, error) {
			if spec != want {
				return nil, errors.New("unexpected spec " + spec)
			}
			return c, nil
		}
	}
	// Cron expressions are parsed on a floating (UTC) wall clock and
	// placed in the schedule's zone (see CronSchedule).
	daily := CronSchedule(0, "0 6 * * *", "Europe/Berlin", parse("CRON_TZ=UTC 0 6 * * *", dailyAt(6, 0, time.UTC)), "{}", "skip")
	if daily.Err != nil {
		t.Fatal(daily.Err)
	}
	year := CronSchedule(1, "@yearly", "UTC", parse("CRON_TZ=UTC @yearly", yearly), "{}", "once")
	hourly := EverySchedule(2, time.Hour, "{}", "skip")
	utc := func(y int, mo time.Month, d, h, m, s int) time.Time { return time.Date(y, mo, d, h, m, s, 0, time.UTC) }

	tests := []struct {
		name                 string
		s                    Schedule
		at                   time.Time
		latest, after, first time.Time
	}{
		{"daily, at the slot", daily, day(3, 6, 0, 0), day(3, 6, 0, 0), day(4, 6, 0, 0), day(3, 6, 0, 0)},
		{"daily, 30s after the slot", daily, day(3, 6, 0, 30), day(3, 6, 0, 0), day(4, 6, 0, 0), day(3, 6, 0, 0)},
		{"daily, 59.999s after the slot", daily, day(3, 6, 0, 59).Add(999 * time.Millisecond), day(3, 6, 0, 0), day(4, 6, 0, 0), day(3, 6, 0, 0)},
		{"daily, a minute after the slot", daily, day(3, 6, 1, 0), day(3, 6, 0, 0), day(4, 6, 0, 0), day(4, 6, 0, 0)},
		{"daily, a second before the slot", daily, day(3, 5, 59, 59), day(2, 6, 0, 0), day(3, 6, 0, 0), day(3, 6, 0, 0)},
		{"daily, late evening", daily, day(3, 23, 0, 0), day(3, 6, 0, 0), day(4, 6, 0, 0), day(4, 6, 0, 0)},
		{"yearly, in December", year, utc(2026, 12, 3, 10, 0, 0), utc(2026, 1, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0)},
		{"yearly, 10s into the year", year, utc(2027, 1, 1, 0, 0, 10), utc(2027, 1, 1, 0, 0, 0), utc(2028, 1, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0)},
		{"@every 1h, at a slot", hourly, utc(2026, 12, 3, 10, 0, 0), utc(2026, 12, 3, 10, 0, 0), utc(2026, 12, 3, 11, 0, 0), utc(2026, 12, 3, 10, 0, 0)},
		{"@every 1h, 59s after a slot", hourly, utc(2026, 12, 3, 10, 0, 59), utc(2026, 12, 3, 10, 0, 0), utc(2026, 12, 3, 11, 0, 0), utc(2026, 12, 3, 10, 0, 0)},
		{"@every 1h, 2m after a slot", hourly, utc(2026, 12, 3, 10, 2, 0), utc(2026, 12, 3, 10, 0, 0), utc(2026, 12, 3, 11, 0, 0), utc(2026, 12, 3, 11, 0, 0)},
		{"@every 1h, before the epoch", hourly, utc(1969, 12, 31, 22, 30, 0), utc(1969, 12, 31, 22, 0, 0), utc(1969, 12, 31, 23, 0, 0), utc(1969, 12, 31, 23, 0, 0)},
	}
	for _, tt := range tests {
		if got := tt.s.latest(tt.at); !got.Equal(tt.latest) {
			t.Errorf("%s: latest(%v) = %v, want %v", tt.name, tt.at, got, tt.latest)
		}
		if got := tt.s.after(tt.at); !got.Equal(tt.after) {
			t.Errorf("%s: after(%v) = %v, want %v", tt.name, tt.at, got, tt.after)
		}
		if got := tt.s.first(tt.at); !got.Equal(tt.first) {
			t.Errorf("%s: first(%v) = %v, want %v", tt.name, tt.at, got, tt.first)
		}
	}

	// A cron with no slot in the past year (and none found by Next) has no
	// latest slot: a worker starts with the next one.
	never := CronSchedule(3, "0 0 29 2 *", "UTC", parse("CRON_TZ=UTC 0 0 29 2 *", func(t time.Time) time.Time {
		if t.Before(utc(2028, 2, 29, 0, 0, 0)) {
			return utc(2028, 2, 29, 0, 0, 0)
		}
		return time.Time{}
	}), "{}", "skip")
	at := utc(2026, 12, 3, 0, 0, 0)
	if got := never.latest(at); !got.IsZero() {
		t.Errorf("leap-day cron: latest(%v) = %v, want none", at, got)
	}
	if got := never.first(at); !got.Equal(utc(2028, 2, 29, 0, 0, 0)) {
		t.Errorf("leap-day cron: first(%v) = %v, want 2028-02-29", at, got)
	}
	if bad := CronSchedule(4, "x", "UTC", func(string) (cronFunc, error) { return nil, errors.New("bad") }, "{}", "skip"); bad.Err == nil || bad.Next != nil {
		t.Errorf("CronSchedule with a parse error: Err %v, want an error and no Next", bad.Err)
	}
}
