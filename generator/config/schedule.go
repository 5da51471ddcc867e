package config

import (
	"fmt"
	"strings"
	"time"

	// Time zones are checked against the Go release's own database, so a
	// config is valid or not whatever the machine has installed.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// Defaults of a schedule entry.
const (
	DefaultTimezone = "UTC"
	DefaultMissed   = "skip"
)

// MinEvery is the shortest interval of an "@every" schedule.
const MinEvery = time.Second

// MissedPolicies are the values schedule.missed accepts.
var MissedPolicies = []string{"skip", "once"}

// scheduleKeys are the keys of one schedule entry.
var scheduleKeys = []string{"cron", "timezone", "payload", "missed"}

// cronParser reads standard five-field cron expressions and the
// descriptors (@hourly, @daily, ..., @every <duration>).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronDescriptors are the descriptors cronParser accepts, for "did you
// mean".
var cronDescriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every"}

// everyPrefix starts an interval schedule.
const everyPrefix = "@every "

// schedules walks a queue's schedule: list; q's payload is already walked.
func (w *walker) schedules(e entry, q *Queue, types []Struct) []Schedule {
	if isNull(e.value) {
		return nil
	}
	if e.value.Kind != yaml.SequenceNode {
		w.errorf(e.value, "schedule must be a list of entries such as \"- cron: '0 6 * * 1'\", not %s", describe(e.value))
		return nil
	}
	structs := make(map[string]*Struct, len(types))
	for i := range types {
		structs[types[i].Name] = &types[i]
	}
	var out []Schedule
	seen := make(map[string]int)
	for _, n := range e.value.Content {
		sc, ok := w.schedule(deref(n), q, structs)
		if !ok {
			continue
		}
		key := sc.Cron + "\x00" + sc.Timezone + "\x00" + sc.PayloadJSON
		if line, dup := seen[key]; dup {
			w.errorAt(sc.Pos, "duplicate schedule: the same cron, timezone and payload as line %d", line)
			continue
		}
		seen[key] = sc.Pos.Line
		out = append(out, sc)
	}
	return out
}

// schedule walks one schedule entry and reports whether it is valid.
func (w *walker) schedule(n *yaml.Node, q *Queue, structs map[string]*Struct) (Schedule, bool) {
	sc := Schedule{Timezone: DefaultTimezone, Missed: DefaultMissed, PayloadJSON: "{}", Pos: pos(n)}
	nerr := len(w.errs)
	if isNull(n) {
		w.errorf(n, "schedule entry must be a mapping such as {cron: \"0 6 * * 1\"}, not empty")
		return sc, false
	}
	s, ok := w.section(n, "schedule entry", scheduleKeys)
	if !ok {
		return sc, false
	}
	if e, ok := s["cron"]; !ok {
		w.errorf(n, `schedule entry: missing required key "cron"`)
	} else if spec, ok := w.str(e); ok {
		sc.Cron = spec
		sc.Every, _ = w.cron(e.value, spec)
	}
	if e, ok := s["timezone"]; ok {
		if tz, ok := w.str(e); ok && w.timezone(e.value, tz) {
			sc.Timezone = tz
			if sc.Every > 0 && tz != DefaultTimezone {
				w.errorf(e.value, "timezone has no effect on an @every schedule (its slots are multiples of the interval since the Unix epoch); remove it")
			}
		}
	}
	if e, ok := s["missed"]; ok {
		if m, ok := w.str(e); ok {
			if !contains(MissedPolicies, m) {
				w.errorf(e.value, "missed must be skip or once, not %q%s", m, didYouMean(m, MissedPolicies))
			} else {
				sc.Missed = m
			}
		}
	}
	if e, ok := s["payload"]; ok {
		enc := &payloadEncoder{w: w, structs: structs}
		var b strings.Builder
		if enc.object(e.value, q.Payload, "schedule payload", "", &b) {
			sc.PayloadJSON = b.String()
		}
	}
	return sc, len(w.errs) == nerr
}

// cron checks a cron expression with robfig/cron's standard parser and
// returns the interval of an @every schedule.
func (w *walker) cron(n *yaml.Node, spec string) (time.Duration, bool) {
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		w.errorf(n, "invalid cron %q: set the time zone with the timezone key, not in the expression", spec)
		return 0, false
	}
	if rest, ok := strings.CutPrefix(spec, everyPrefix); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		switch {
		case err != nil:
			w.errorf(n, "invalid cron %q: @every takes a Go duration such as 30s, 15m or 1h30m", spec)
			return 0, false
		case d < MinEvery:
			w.errorf(n, "invalid cron %q: the interval must be at least %s", spec, MinEvery)
			return 0, false
		}
		return d, true
	}
	sched, err := parseCron(spec)
	if err != nil {
		hint := ""
		if strings.HasPrefix(spec, "@") {
			word, _, _ := strings.Cut(spec, " ")
			hint = didYouMean(word, cronDescriptors)
		}
		w.errorf(n, "invalid cron %q: %v%s", spec, err, hint)
		return 0, false
	}
	// robfig/cron looks five years ahead; a schedule with no slot in that
	// time (February 30th) never runs.
	from := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if sched.Next(from).IsZero() {
		w.errorf(n, "invalid cron %q: it never fires", spec)
		return 0, false
	}
	return 0, true
}

// parseCron parses spec, turning a panic of the parser on a malformed
// expression into an error.
func parseCron(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("malformed expression")
		}
	}()
	return cronParser.Parse(spec)
}

// timezone checks an IANA time zone name.
func (w *walker) timezone(n *yaml.Node, tz string) bool {
	switch tz {
	case "":
		w.errorf(n, "timezone must not be empty (leave it out for UTC)")
		return false
	case "Local":
		w.errorf(n, "timezone Local depends on the machine a worker runs on; name the zone, such as Europe/Berlin")
		return false
	}
	if _, err := time.LoadLocation(tz); err != nil {
		w.errorf(n, "unknown timezone %q: use an IANA name such as UTC, Europe/Berlin or America/New_York", tz)
		return false
	}
	return true
}
