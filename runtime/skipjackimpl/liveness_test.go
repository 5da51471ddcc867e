package skipjackimpl

import (
	"testing"
	"time"
	"unsafe"
)

// stepWall returns t with its wall-clock reading moved by d and its
// monotonic reading kept: what time.Now returns once the system clock was
// stepped by d (an NTP correction, a VM resumed), which no exported API
// builds. It relies on time.Time's layout (wall, ext, loc; stable since Go
// 1.9) and checks its result, so a change of that layout fails the test
// instead of testing nothing.
func stepWall(t *testing.T, at time.Time, d time.Duration) time.Time {
	t.Helper()
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(at) != unsafe.Sizeof(layout{}) {
		t.Fatalf("time.Time is %d bytes, stepWall expects %d", unsafe.Sizeof(at), unsafe.Sizeof(layout{}))
	}
	moved := at.Add(d) // both readings moved by d
	stepped := at
	(*layout)(unsafe.Pointer(&stepped)).wall = (*layout)(unsafe.Pointer(&moved)).wall
	if stepped.Sub(at) != 0 || stepped.Round(0).Sub(at.Round(0)) != d {
		t.Fatalf("stepWall(%v): monotonic offset %v (want 0), wall offset %v (want %v): time.Time's layout changed",
			d, stepped.Sub(at), stepped.Round(0).Sub(at.Round(0)), d)
	}
	return stepped
}

// TestLivenessAcrossClockSteps checks that the age of a worker's last
// proof of life is measured on the monotonic clock: a step of the wall
// clock neither makes a fresh proof look stale (which cancels every
// running handler) nor a stale one look fresh (which hides a real loss of
// contact with the database). Readings without a monotonic part (as from
// Round(0)) are still compared by their wall clock.
func TestLivenessAcrossClockSteps(t *testing.T) {
	t.Parallel()
	const proof = 2 * time.Second
	proven := time.Now()
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"1s later", proven.Add(time.Second), false},
		{"3s later", proven.Add(3 * time.Second), true},
		{"1s later, wall clock stepped an hour forward", stepWall(t, proven.Add(time.Second), time.Hour), false},
		{"3s later, wall clock stepped an hour back", stepWall(t, proven.Add(3*time.Second), -time.Hour), true},
		{"1s later, wall clock stepped 10s forward", stepWall(t, proven.Add(time.Second), 10*time.Second), false},
		{"3s later, wall clock stepped 2s back", stepWall(t, proven.Add(3*time.Second), -2*time.Second), true},
	}
	for _, tc := range tests {
		l := &liveness{}
		l.provenAt(proven)
		if got := l.doubting(tc.now, proof); got != tc.want {
			t.Errorf("%s: doubting(now, %v) = %v, want %v", tc.name, proof, got, tc.want)
		}
	}

	// A later proof replaces an earlier one even when the wall clock was
	// stepped back between them.
	l := &liveness{}
	l.provenAt(proven)
	later := stepWall(t, proven.Add(3*time.Second), -time.Hour)
	l.provenAt(later)
	if l.doubting(later.Add(time.Second), proof) {
		t.Errorf("a proof taken 3s later, after the wall clock was stepped back an hour, was not recorded")
	}
	// An earlier proof never replaces a later one.
	l.provenAt(proven)
	if l.doubting(later.Add(time.Second), proof) {
		t.Errorf("an earlier proof replaced a later one")
	}

	// Without monotonic readings, the wall clock is all there is.
	l = &liveness{}
	wall := proven.Round(0)
	l.provenAt(wall)
	if !l.doubting(wall.Add(3*time.Second), proof) || l.doubting(wall.Add(time.Second), proof) {
		t.Errorf("wall-clock readings: want doubt 3s after the proof and none 1s after")
	}
	if l := (&liveness{}); l.doubting(time.Now(), proof) {
		t.Errorf("doubting before any proof, want not")
	}
}
