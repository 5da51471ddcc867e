package skipjackimpl

import "testing"

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
