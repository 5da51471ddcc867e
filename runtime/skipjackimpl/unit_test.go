package skipjackimpl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestRetryDelayBounds checks the backoff of every attempt against its
// window: the upper half of min*2^(attempt-1), capped at max, never below
// min. A retryDelay that always returned the minimum fails from attempt 2.
func TestRetryDelayBounds(t *testing.T) {
	t.Parallel()
	const minD, maxD = 100 * time.Millisecond, 10 * time.Second
	for attempt := 1; attempt <= 12; attempt++ {
		exp := minD << (attempt - 1)
		if exp > maxD || exp <= 0 {
			exp = maxD
		}
		lo, hi := max(exp/2, minD), exp
		for range 200 {
			d := retryDelay(attempt, minD, maxD)
			if d < lo || d > hi {
				t.Fatalf("retryDelay(%d) = %v, want within [%v, %v]", attempt, d, lo, hi)
			}
		}
	}
}

// TestCapMessage checks that stored error messages are capped at 2 KB on a
// rune boundary and short ones are kept whole.
func TestCapMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"short", "boom"},
		{"exactly the cap", strings.Repeat("x", maxErrorMessage)},
		{"ascii over the cap", strings.Repeat("x", 10*maxErrorMessage)},
		{"multibyte over the cap", strings.Repeat("é", maxErrorMessage)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := capMessage(tc.in)
			if len(tc.in) <= maxErrorMessage {
				if got != tc.in {
					t.Errorf("capMessage changed a message within the cap")
				}
				return
			}
			if len(got) > maxErrorMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
				t.Errorf("capMessage = %d bytes (valid UTF-8: %v), want at most %d, valid, ending in …", len(got), utf8.ValidString(got), maxErrorMessage)
			}
		})
	}
}

// TestEverySlots checks that "@every d" slots are whole multiples of d since
// the Unix epoch, the same in every process whatever its clock reads.
func TestEverySlots(t *testing.T) {
	t.Parallel()
	s := EverySchedule(0, 7*time.Second, "{}", "skip")
	for _, at := range []time.Time{time.Unix(1_700_000_003, 5), time.Unix(1_700_000_006, 999_999_999), time.Unix(-20, 0)} {
		latest, next := s.latest(at), s.after(at)
		if latest.UnixNano()%int64(7*time.Second) != 0 || next.UnixNano()%int64(7*time.Second) != 0 {
			t.Errorf("slots around %v: latest %v, next %v; want multiples of 7s since the epoch", at, latest, next)
		}
		if latest.After(at) || !next.After(at) || next.Sub(latest) != 7*time.Second {
			t.Errorf("slots around %v: latest %v, next %v; want latest <= t < next, 7s apart", at, latest, next)
		}
	}
}

// TestCronLatest checks that the latest cron slot at or before t is found
// by walking Next, here with an hourly schedule written with the standard
// library.
func TestCronLatest(t *testing.T) {
	t.Parallel()
	hourly := func(t time.Time) time.Time { return t.Truncate(time.Hour).Add(time.Hour) }
	s := Schedule{Next: hourly}
	at := time.Date(2026, 3, 29, 2, 30, 0, 0, time.UTC)
	if got, want := s.latest(at), time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("latest(%v) = %v, want %v", at, got, want)
	}
	if got, want := s.after(at), time.Date(2026, 3, 29, 3, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("after(%v) = %v, want %v", at, got, want)
	}
}

// TestEnqueueOptions checks option validation per queue.
func TestEnqueueOptions(t *testing.T) {
	t.Parallel()
	plain := &Queue[struct{}]{spec: QueueSpec{Name: "plain"}}
	ranked := &Queue[struct{}]{spec: QueueSpec{Name: "ranked", Priority: true}}
	tests := []struct {
		name    string
		q       *Queue[struct{}]
		opts    []skipjack.EnqueueOption
		wantErr string
	}{
		{"no options", plain, nil, ""},
		{"priority on a plain queue", plain, []skipjack.EnqueueOption{skipjack.Priority(1)}, "not declared with priority"},
		{"priority in range", ranked, []skipjack.EnqueueOption{skipjack.Priority(9)}, ""},
		{"priority out of range", ranked, []skipjack.EnqueueOption{skipjack.Priority(10)}, "outside 0..9"},
		{"negative delay", plain, []skipjack.EnqueueOption{skipjack.Delay(-time.Second)}, "negative delay"},
		{"nil option", plain, []skipjack.EnqueueOption{nil}, ""},
		{"max attempts 1", plain, []skipjack.EnqueueOption{skipjack.MaxAttempts(1)}, ""},
		{"max attempts 0", plain, []skipjack.EnqueueOption{skipjack.MaxAttempts(0)}, "MaxAttempts(0): a job needs at least 1 attempt"},
		{"negative max attempts", ranked, []skipjack.EnqueueOption{skipjack.MaxAttempts(-3)}, "MaxAttempts(-3)"},
		{"max attempts over int32", plain, []skipjack.EnqueueOption{skipjack.MaxAttempts(1 << 40)}, "at most 2147483647"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, _, err := tc.q.enqueueOptions(tc.opts)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("enqueueOptions = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestMaxPayloadBytes checks that a payload over max_payload_bytes is
// refused before any statement runs.
func TestMaxPayloadBytes(t *testing.T) {
	t.Parallel()
	type payload struct{ S string }
	q := &Queue[payload]{spec: QueueSpec{Name: "small", MaxPayloadBytes: 16}}
	if _, err := q.encode(&payload{S: "ok"}); err != nil {
		t.Errorf("encode of a small payload: %v", err)
	}
	if _, err := q.encode(&payload{S: strings.Repeat("x", 32)}); err == nil || !strings.Contains(err.Error(), "max_payload_bytes") {
		t.Errorf("encode of a large payload = %v, want a max_payload_bytes error", err)
	}
}

// TestOverran checks when an attempt counts as overrunning its timeout: a
// nil result that arrived before the deadline wins even if the deadline
// fired before the worker looked.
func TestOverran(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	other := errors.New("handler failed")
	tests := []struct {
		name  string
		err   error
		cause error
		took  time.Duration
		want  bool
	}{
		{"finished in time", nil, nil, timeout / 2, false},
		{"failed in time", other, nil, timeout / 2, false},
		{"nil returned just before the deadline fired", nil, errTimeout, timeout - time.Millisecond, false},
		{"nil returned after ignoring the deadline", nil, errTimeout, timeout + time.Millisecond, true},
		{"nil returned exactly at the deadline", nil, errTimeout, timeout, true},
		{"the deadline's error returned", context.DeadlineExceeded, errTimeout, timeout, true},
		{"an error returned as the deadline fired", other, errTimeout, timeout - time.Millisecond, true},
		{"cancelled for another reason", context.Canceled, errShutdown, 2 * timeout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := overran(tt.err, tt.cause, tt.took, timeout); got != tt.want {
				t.Errorf("overran(%v, %v, %v, %v) = %v, want %v", tt.err, tt.cause, tt.took, timeout, got, tt.want)
			}
		})
	}
}

// TestStorableText checks what reaches the database of a handler's error:
// NUL bytes dropped, invalid UTF-8 replaced, the cap kept.
func TestStorableText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"nul\x00in the middle", "nulin the middle"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"\x00\xff\xfe", "\uFFFD"},
		{"é ok", "é ok"},
	}
	for _, tc := range tests {
		if got := storableText(tc.in); got != tc.want {
			t.Errorf("storableText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := storableText(strings.Repeat("\x00a\xff", 2*maxErrorMessage))
	if len(long) > maxErrorMessage || !utf8.ValidString(long) || strings.ContainsRune(long, 0) {
		t.Errorf("storableText of a long bad text = %d bytes, valid %v; want capped, valid, without NUL", len(long), utf8.ValidString(long))
	}
}

// TestResolveSplitsRejectedBatch has Postgres reject (SQLSTATE 22021) any
// batch that carries one bad message among 16 results: the batch is split
// until the bad row is alone, which is then written with a placeholder,
// and every other result is written with its own message.
func TestResolveSplitsRejectedBatch(t *testing.T) {
	t.Parallel()
	f := &fakeStore{rejectMessage: "BAD"}
	r := &completer[struct{}]{store: f, log: slog.New(slog.DiscardHandler)}
	var rs []Resolution
	for i := range 16 {
		msg := fmt.Sprintf("error %d", i)
		if i == 11 {
			msg = "BAD " + msg
		}
		rs = append(rs, Resolution{ID: int64(i + 1), Claim: 1, Action: ActionRetry, Message: msg})
	}
	matched, err := r.resolve(context.Background(), rs)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if len(matched) != len(rs) {
		t.Fatalf("resolve matched %d of %d results", len(matched), len(rs))
	}
	got := map[int64]string{}
	for _, x := range f.resolves {
		got[x.ID] = x.Message
	}
	for _, x := range rs {
		want := x.Message
		if x.ID == 12 {
			want = unstorable
		}
		if got[x.ID] != want {
			t.Errorf("job %d written with %q, want %q", x.ID, got[x.ID], want)
		}
	}
	// 1 whole + log2(16) levels of halves on the bad path + the placeholder.
	if f.resolveCalls > 2*4+2 {
		t.Errorf("%d Resolve statements for one bad row among 16, want a binary search", f.resolveCalls)
	}
}

// TestCronSlotsAcrossDST pins the daylight-saving rule of cron slots in
// America/New_York: each wall-clock time is one slot. On the night the
// clock springs forward (2026-03-08, 02:00 -> 03:00) a 02:30 slot runs at
// 03:30; on the night it falls back (2026-11-01, 02:00 -> 01:00) a 01:30
// slot runs once, at its first occurrence (EDT).
func TestCronSlotsAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	tests := []struct {
		name         string
		hour, minute int
		from         time.Time
		want         []string // RFC 3339 in New York
	}{
		{"skipped time runs after the jump", 2, 30, time.Date(2026, 3, 7, 12, 0, 0, 0, ny),
			[]string{"2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"repeated time runs once", 1, 30, time.Date(2026, 10, 31, 12, 0, 0, 0, ny),
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"ordinary days", 6, 0, time.Date(2026, 6, 1, 12, 0, 0, 0, ny),
			[]string{"2026-06-02T06:00:00-04:00", "2026-06-03T06:00:00-04:00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The generated parser gets the expression on a floating
			// (UTC) wall clock; the schedule places it in the zone.
			s := CronSchedule(0, "x", "America/New_York", func(spec string) (cronFunc, error) {
				if spec != "CRON_TZ=UTC x" {
					return nil, errors.New("unexpected spec " + spec)
				}
				return dailyAt(tc.hour, tc.minute, time.UTC), nil
			}, "{}", "skip")
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			at := tc.from
			for _, want := range tc.want {
				at = s.after(at)
				if got := at.In(ny).Format(time.RFC3339); got != want {
					t.Fatalf("slot after %v = %s, want %s", at, got, want)
				}
			}
			// From inside the repeated hour's second pass, the slot
			// already run is not run again.
			if tc.hour == 1 {
				second := time.Date(2026, 11, 1, 6, 10, 0, 0, time.UTC) // 01:10 EST
				if got := s.after(second).In(ny).Format(time.RFC3339); got != "2026-11-02T01:30:00-05:00" {
					t.Errorf("slot after 01:10 EST = %s, want the next day's", got)
				}
			}
		})
	}
}

// TestPayloadTooLarge checks that a payload over max_payload_bytes is
// refused with an error matching skipjack.ErrPayloadTooLarge that names
// both sizes, and that one at the cap passes.
func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	type p struct{ S string }
	q := &Queue[p]{spec: QueueSpec{Name: "capped", MaxPayloadBytes: 16}}
	if _, err := q.encode(&p{S: "1234567"}); err != nil { // {"S":"1234567"}: 15 bytes
		t.Fatalf("payload under the cap refused: %v", err)
	}
	_, err := q.encode(&p{S: "12345678901234567890"})
	if !errors.Is(err, skipjack.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "28 bytes") || !strings.Contains(err.Error(), "of 16") {
		t.Errorf("oversized payload: %v; want ErrPayloadTooLarge naming 28 bytes and the cap of 16", err)
	}
}
