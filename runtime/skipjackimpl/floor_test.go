package skipjackimpl

import (
	"testing"
	"time"
)

// TestClaimFloor checks how claims move the floors: a floored claim sets
// the floor of each priority it took jobs of to the lowest job it took, or
// to its clock less floorSlack (pinnedSlack after a slow sweep) when that
// is lower; a sweep (one per period) and a release only ever lower them.
func TestClaimFloor(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	row := func(prio int16, runAt time.Time, id int64) ClaimedRow {
		return ClaimedRow{ID: id, Priority: prio, RunAt: runAt}
	}
	type key struct {
		at time.Time
		id int64
	}
	tests := []struct {
		name     string
		priority bool
		steps    func(f *claimFloor)
		want     []key // the floors after the steps, per priority
	}{
		{
			name: "a backlog older than the slack: the lowest job taken",
			steps: func(f *claimFloor) {
				f.claimed(f.plan(t0, 10), []ClaimedRow{row(0, t0.Add(-time.Minute), 7), row(0, t0.Add(-time.Minute), 5)}, t0)
			},
			want: []key{{t0.Add(-time.Minute), 5}},
		},
		{
			name:  "jobs younger than the slack: the claim's clock less the slack",
			steps: func(f *claimFloor) { f.claimed(f.plan(t0, 10), []ClaimedRow{row(0, t0.Add(-time.Millisecond), 9)}, t0) },
			want:  []key{{t0.Add(-floorSlack), 0}},
		},
		{
			name: "after a slow sweep, jobs younger than the slack: the claim's clock less the pinned slack",
			steps: func(f *claimFloor) {
				f.plan(t0, 10)
				f.swept(pinnedSweep)
				f.claimed(f.plan(t0.Add(time.Millisecond), 10), []ClaimedRow{row(0, t0.Add(-time.Millisecond), 9)}, t0)
			},
			want: []key{{t0.Add(-pinnedSlack), 0}},
		},
		{
			name: "after a fast sweep, the full slack again",
			steps: func(f *claimFloor) {
				f.plan(t0, 10)
				f.swept(pinnedSweep)
				f.plan(t0.Add(time.Second), 10)
				f.swept(pinnedSweep - time.Millisecond)
				f.claimed(f.plan(t0.Add(time.Second+time.Millisecond), 10), []ClaimedRow{row(0, t0.Add(time.Second-time.Millisecond), 9)}, t0.Add(time.Second))
			},
			want: []key{{t0.Add(time.Second - floorSlack), 0}},
		},
		{
			name: "after a slow sweep, a backlog older than the slack: still the lowest job taken",
			steps: func(f *claimFloor) {
				f.plan(t0, 10)
				f.swept(time.Second)
				f.claimed(f.plan(t0.Add(time.Millisecond), 10), []ClaimedRow{row(0, t0.Add(-time.Minute), 7)}, t0)
			},
			want: []key{{t0.Add(-time.Minute), 7}},
		},
		{
			name: "a claim that took nothing moves nothing",
			steps: func(f *claimFloor) {
				f.claimed(f.plan(t0, 10), []ClaimedRow{row(0, t0.Add(-time.Minute), 5)}, t0)
				f.claimed(f.plan(t0.Add(time.Millisecond), 10), nil, time.Time{})
			},
			want: []key{{t0.Add(-time.Minute), 5}},
		},
		{
			name:     "each priority its own floor",
			priority: true,
			steps: func(f *claimFloor) {
				f.claimed(f.plan(t0, 10), []ClaimedRow{row(3, t0.Add(-time.Hour), 4), row(0, t0.Add(-time.Minute), 8), row(3, t0.Add(-time.Hour), 2)}, t0)
			},
			want: []key{{t0.Add(-time.Minute), 8}, {}, {}, {t0.Add(-time.Hour), 2}, {}, {}, {}, {}, {}, {}},
		},
		{
			name: "a sweep lowers the floor to a job below it, and only then",
			steps: func(f *claimFloor) {
				f.claimed(f.plan(t0, 10), []ClaimedRow{row(0, t0.Add(-time.Minute), 50)}, t0)
				p := f.plan(t0.Add(time.Second), 10)
				if p.floored || p.limit != sweepLimit {
					t.Errorf("plan a period after the last sweep = %+v, want a sweep of %d", p, sweepLimit)
				}
				f.claimed(p, []ClaimedRow{row(0, t0.Add(-time.Hour), 3)}, time.Time{})
				f.claimed(claimPlan{limit: 1}, []ClaimedRow{row(0, t0, 99)}, time.Time{})
			},
			want: []key{{t0.Add(-time.Hour), 3}},
		},
		{
			name: "a slow sweep spaces the next one out",
			steps: func(f *claimFloor) {
				f.plan(t0.Add(time.Second), 10)
				f.swept(300 * time.Millisecond)
				if p := f.plan(t0.Add(3*time.Second), 10); !p.floored {
					t.Errorf("plan 2s after a sweep of 300ms = %+v, want floored (the next sweep after 3s)", p)
				}
				if p := f.plan(t0.Add(4*time.Second), 10); p.floored {
					t.Errorf("plan 3s after a sweep of 300ms = %+v, want a sweep", p)
				}
			},
			want: []key{{}},
		},
		{
			name: "no sweep beside a sweep in flight",
			steps: func(f *claimFloor) {
				f.plan(t0.Add(time.Second), 10)
				if p := f.plan(t0.Add(5*time.Second), 10); !p.floored {
					t.Errorf("plan 4s into a sweep still in flight = %+v, want floored", p)
				}
				f.swept(4 * time.Second)
				if p := f.plan(t0.Add(41*time.Second), 10); p.floored {
					t.Errorf("plan 40s after a sweep of 4s returned = %+v, want a sweep", p)
				}
			},
			want: []key{{}},
		},
		{
			name: "a release lowers the floor to the released job",
			steps: func(f *claimFloor) {
				f.claimed(f.plan(t0, 10), []ClaimedRow{row(0, t0.Add(-time.Minute), 50), row(0, t0.Add(-time.Minute), 51)}, t0)
				f.released([]ClaimedRow{row(0, t0.Add(-time.Minute), 50)})
				f.claimed(f.plan(t0.Add(time.Millisecond), 10), []ClaimedRow{row(0, t0.Add(-30*time.Second), 60)}, t0)
				f.released([]ClaimedRow{row(0, t0.Add(-2*time.Minute), 40)})
			},
			want: []key{{t0.Add(-2 * time.Minute), 40}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newClaimFloor(tt.priority, time.Second, t0)
			if p := f.plan(t0, 10); !p.floored || p.limit != 10 {
				t.Fatalf("first plan = %+v, want floored, limit 10 (the floors start before every job)", p)
			}
			tt.steps(f)
			for k, w := range tt.want {
				if got := (key{f.at.runAts[k], f.at.ids[k]}); !got.at.Equal(w.at) || got.id != w.id {
					t.Errorf("floor of priority %d = (%v, %d), want (%v, %d)", k, got.at, got.id, w.at, w.id)
				}
			}
		})
	}
}

// TestClaimGap checks when short claims are spaced, and by how much: only
// after a sweep slow enough to show a pinned horizon, and no longer after a
// fast one; claimGapShare times as long as the last claim took, at most
// pinnedClaimGap; never for a worker without floors.
func TestClaimGap(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		sweeps   []time.Duration // the sweeps' durations, in order
		lastTook time.Duration   // how long the last claim took
		want     time.Duration
	}{
		{name: "no sweep yet", lastTook: 10 * time.Millisecond, want: 0},
		{name: "a fast sweep", sweeps: []time.Duration{pinnedSweep - time.Millisecond}, lastTook: 10 * time.Millisecond, want: 0},
		{name: "a slow sweep, a fast claim", sweeps: []time.Duration{pinnedSweep}, lastTook: time.Millisecond, want: 4 * time.Millisecond},
		{name: "a slow sweep, a claim of a quarter of the gap", sweeps: []time.Duration{pinnedSweep}, lastTook: pinnedClaimGap / 4, want: pinnedClaimGap},
		{name: "a slow sweep, a slow claim", sweeps: []time.Duration{time.Second}, lastTook: time.Second, want: pinnedClaimGap},
		{name: "a slow sweep, no claim yet", sweeps: []time.Duration{time.Second}, want: 0},
		{name: "a fast sweep after a slow one", sweeps: []time.Duration{time.Second, time.Millisecond}, lastTook: 10 * time.Millisecond, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newClaimFloor(false, time.Second, t0)
			for i, d := range tt.sweeps {
				f.plan(t0.Add(time.Duration(i+1)*time.Minute), 10)
				f.swept(d)
			}
			if got := f.claimGap(tt.lastTook); got != tt.want {
				t.Errorf("claimGap(%v) = %v, want %v", tt.lastTook, got, tt.want)
			}
		})
	}
	var none *claimFloor
	if got := none.claimGap(time.Second); got != 0 {
		t.Errorf("claimGap() of a worker without floors = %v, want 0", got)
	}
}

// TestClaimFloorNil checks that a worker without floors plans unfloored
// claims of its whole limit and ignores what they return.
func TestClaimFloorNil(t *testing.T) {
	t.Parallel()
	var f *claimFloor
	if p := f.plan(time.Now(), 20); p.floored || p.limit != 20 {
		t.Errorf("plan = %+v, want unfloored, limit 20", p)
	}
	f.claimed(claimPlan{limit: 20}, []ClaimedRow{{ID: 1}}, time.Now())
	f.released([]ClaimedRow{{ID: 1}})
}
