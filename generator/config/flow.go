package config

import "time"

// limitsKeys are the keys of a queue's limits: section.
var limitsKeys = []string{"concurrency", "rate", "per_key"}

// perKeyKeys are the keys of limits.per_key.
var perKeyKeys = []string{"by", "concurrency"}

// rateKeys are the keys of limits.rate.
var rateKeys = []string{"count", "per"}

// serialKeys are the keys of a queue's serial: section.
var serialKeys = []string{"by"}

// MinRatePer and MaxRatePer bound limits.rate.per. Workers record the
// starts of a window in slices of a hundredth of it, so a shorter window
// would count in slices finer than a claim's round trip.
const (
	MinRatePer = time.Second
	MaxRatePer = 24 * time.Hour
)

// limits walks a queue's limits: section; q's payload is already walked.
func (w *walker) limits(e entry, q *Queue) *Limits {
	l := &Limits{Pos: pos(e.keyNode)}
	if isNull(e.value) {
		w.errorf(e.keyNode, "limits must be a mapping such as {concurrency: 5} or {rate: {count: 100, per: 1s}}")
		return nil
	}
	s, _ := w.section(e.value, "limits", limitsKeys)
	if c, ok := s["concurrency"]; ok {
		if n, ok := w.integer(c); ok {
			if n < 1 {
				w.errorf(c.value, "limits.concurrency must be at least 1 (leave it out for no limit)")
			} else {
				l.Concurrency = n
			}
		}
	}
	if r, ok := s["rate"]; ok {
		l.Rate = w.rate(r)
	}
	if p, ok := s["per_key"]; ok {
		l.PerKey = w.perKey(p, q)
	}
	if len(e.value.Content) == 0 {
		w.errorf(e.value, "limits sets no limit: give concurrency, rate, per_key or several")
	}
	if l.Concurrency == 0 && l.Rate == nil && l.PerKey == nil {
		return nil
	}
	return l
}

// perKey walks limits.per_key; q's payload is already walked.
func (w *walker) perKey(e entry, q *Queue) *PerKey {
	if isNull(e.value) {
		w.errorf(e.keyNode, "limits.per_key must be a mapping such as {by: [tenant_id], concurrency: 2}")
		return nil
	}
	s, _ := w.section(e.value, "limits.per_key", perKeyKeys)
	p := &PerKey{Pos: pos(e.keyNode)}
	ok := true
	if by, has := s["by"]; !has {
		w.errorf(e.value, "limits.per_key needs by: the payload fields whose equal values make a key, such as {by: [tenant_id], concurrency: 2}")
		ok = false
	} else if p.By = w.keyFields(by, q.Payload, "limits.per_key"); len(p.By) == 0 {
		ok = false
	}
	if c, has := s["concurrency"]; !has {
		w.errorf(e.value, "limits.per_key needs concurrency: how many jobs of one key may run at once")
		ok = false
	} else if n, valid := w.integer(c); !valid {
		ok = false
	} else if n < 1 {
		w.errorf(c.value, "limits.per_key.concurrency must be at least 1 (leave per_key out for no limit per key)")
		ok = false
	} else {
		p.Concurrency = n
	}
	if !ok {
		return nil
	}
	return p
}

// rate walks limits.rate.
func (w *walker) rate(e entry) *Rate {
	if isNull(e.value) {
		w.errorf(e.keyNode, "limits.rate must be a mapping such as {count: 100, per: 1s}")
		return nil
	}
	s, _ := w.section(e.value, "limits.rate", rateKeys)
	r := &Rate{Per: time.Second}
	ok := true
	if c, has := s["count"]; !has {
		w.errorf(e.value, "limits.rate needs count: how many jobs may start per window")
		ok = false
	} else if n, valid := w.integer(c); !valid {
		ok = false
	} else if n < 1 {
		w.errorf(c.value, "limits.rate.count must be at least 1")
		ok = false
	} else {
		r.Count = n
	}
	if p, has := s["per"]; has {
		d, valid := w.duration(p)
		switch {
		case !valid:
			ok = false
		case d < MinRatePer || d > MaxRatePer:
			w.errorf(p.value, "limits.rate.per must be between %s and %s, not %s (for finer rates scale count: 5 per 100ms is 50 per 1s)", MinRatePer, "24h", d)
			ok = false
		default:
			r.Per = d
		}
	}
	if !ok {
		return nil
	}
	return r
}

// serial walks a queue's serial: section; q's payload and schedules are
// already walked.
func (w *walker) serial(e entry, q *Queue) *Serial {
	if isNull(e.value) {
		w.errorf(e.keyNode, "serial must be a mapping such as {by: [account_id]}")
		return nil
	}
	s, _ := w.section(e.value, "serial", serialKeys)
	by, ok := s["by"]
	if !ok {
		w.errorf(e.value, "serial needs by: the payload fields whose equal values make jobs run one at a time, such as {by: [account_id]}")
		return nil
	}
	keys := w.keyFields(by, q.Payload, "serial")
	if len(keys) == 0 {
		return nil
	}
	if len(q.Schedule) > 0 {
		w.errorf(e.keyNode, "serial cannot be combined with schedule: a schedule's jobs all carry its one payload, so they would share a key; use limits.concurrency: 1 to run them one at a time")
		return nil
	}
	return &Serial{By: keys, Pos: pos(e.keyNode)}
}
