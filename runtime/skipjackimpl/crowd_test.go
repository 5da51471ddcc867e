package skipjackimpl

import (
	"slices"
	"testing"
)

// TestCrowd: a worker that claims alone covers its ids densely, whatever
// order its two claims in flight come back in, and its window is full (so
// that it trusts what it sees) after crowdWindow claims; chunks of other
// processes between its claims make it crowded, and it is no longer
// crowded once they stop.
func TestCrowd(t *testing.T) {
	span := func(lo, hi int64) claimResult {
		return claimResult{n: int(hi - lo + 1), minID: lo, maxID: hi}
	}
	var alone crowd
	for i, r := range []claimResult{span(101, 200), span(1, 100), span(301, 400), span(201, 300), span(401, 500)} {
		if alone.add(r) {
			t.Errorf("alone, claim %d: crowded, want not", i)
		}
		if got, want := alone.full(), i+1 >= crowdWindow; got != want {
			t.Errorf("alone, claim %d: full() = %v, want %v", i, got, want)
		}
	}
	var shared crowd
	crowded := false
	for i := range int64(6) {
		lo := 1 + i*400 // 3 other processes take 300 ids between this worker's claims of 100
		crowded = shared.add(span(lo, lo+99))
	}
	if !crowded {
		t.Error("with other claimers: not crowded, want crowded")
	}
	for i := range int64(crowdWindow) {
		lo := 10_000 + i*100
		crowded = shared.add(span(lo, lo+99))
	}
	if crowded {
		t.Error("alone again: crowded, want not")
	}
}

// claimRounds adds to c the claims of 3×crowdWindow rounds in which this
// worker takes mine chunks of 1,000 ids, gaps of each chunk's ids not taken
// (jobs not due yet), then other processes take others chunks; it passes
// what each add reported to seen.
func claimRounds(c *crowd, mine, others, gaps int64, seen func(crowded bool)) {
	next := int64(1)
	for range 3 * crowdWindow {
		for range mine {
			seen(c.add(claimResult{n: int(1000 - gaps), minID: next, maxID: next + 999}))
			next += 1000
		}
		next += 1000 * others
	}
}

// TestCrowdSeesOneOtherProcess: the crowd signal for the ids a worker's
// last claims took, beside zero, one or more other processes that claim
// chunks of the same size. One other process must count: its claims walk
// past this worker's as surely as seven others' do. A worker alone must
// never look crowded once its window is full; a crowded one must look
// crowded at least once in every window (from then on it runs one claim
// at a time, so its chunks alternate with the others' and it stays so).
func TestCrowdSeesOneOtherProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// mine and others are how many chunks of 1,000 ids this worker
		// and the other processes take in each round, in that order.
		mine, others int64
		// gaps is how many ids in every 1,000 of this worker's chunks it
		// did not take (jobs not due yet).
		gaps int64
		// want is whether the worker looks crowded.
		want bool
	}{
		{name: "alone", mine: 1, others: 0, want: false},
		{name: "alone, two claims in flight", mine: 2, others: 0, want: false},
		{name: "alone, a tenth of the jobs not due", mine: 1, others: 0, gaps: 100, want: false},
		{name: "one other, alternating", mine: 1, others: 1, want: true},
		{name: "one other, both with two claims in flight", mine: 2, others: 2, want: true},
		{name: "one other claiming half as often", mine: 2, others: 1, want: true},
		{name: "seven others", mine: 1, others: 7, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c crowd
			var seen []bool // what each claim after the first full window showed
			claimRounds(&c, tt.mine, tt.others, tt.gaps, func(crowded bool) {
				if c.next > crowdWindow {
					seen = append(seen, crowded)
				}
			})
			for i := 0; i+crowdWindow <= len(seen); i++ {
				window := seen[i : i+crowdWindow]
				if got := slices.Contains(window, true); got != tt.want {
					t.Fatalf("claims %d-%d after the first window: crowded at some claim = %v, want %v (%v)",
						i+1, i+crowdWindow, got, tt.want, window)
				}
			}
		})
	}
}

// TestCrowdCountsClaimers: how many claimers a worker's last claims show,
// beside others that claim chunks of the same size between its claims, and
// which of those crowds make its small claims take turns (turnMinCrowd);
// large claims take turns in any crowd, and small ones in none until the
// window is full.
func TestCrowdCountsClaimers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// mine and others are how many chunks of 1,000 ids this worker
		// and the other processes take in each round, in that order.
		mine, others int64
		// gaps is how many ids in every 1,000 of this worker's chunks it
		// did not take (jobs not due yet).
		gaps      int64
		want      int
		wantTurns bool
	}{
		{name: "alone", mine: 1, want: 1},
		{name: "alone, two claims in flight", mine: 2, want: 1},
		{name: "alone, a tenth of the jobs not due", mine: 1, gaps: 100, want: 1},
		{name: "one other", mine: 1, others: 1, want: 2},
		{name: "three others", mine: 1, others: 3, want: 4},
		{name: "three others, a tenth not due", mine: 1, others: 3, gaps: 100, want: 4},
		{name: "five others", mine: 1, others: 5, want: 6, wantTurns: true},
		{name: "seven others", mine: 1, others: 7, want: 8, wantTurns: true},
		{name: "fifteen others", mine: 1, others: 15, want: 16, wantTurns: true},
	}
	var early crowd
	for i := range int64(crowdWindow - 1) { // fifteen others, but the window is not full
		early.add(claimResult{n: 1000, minID: 1 + i*16_000, maxID: 1000 + i*16_000})
		if early.takeTurns(150) {
			t.Errorf("after %d claims: takeTurns(150) = true before the window is full", i+1)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c crowd
			claimRounds(&c, tt.mine, tt.others, tt.gaps, func(bool) {})
			if got := c.claimers(); got != tt.want {
				t.Errorf("claimers() = %d, want %d", got, tt.want)
			}
			if got := c.takeTurns(150); got != tt.wantTurns {
				t.Errorf("takeTurns(150) = %v, want %v", got, tt.wantTurns)
			}
			if !c.takeTurns(turnMinClaim) {
				t.Errorf("takeTurns(%d) = false, want true (large claims take turns in any crowd)", turnMinClaim)
			}
		})
	}
}
