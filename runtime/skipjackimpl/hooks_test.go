package skipjackimpl

import (
	"context"
	"errors"
	"testing"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// TestAttemptOutcome checks the outcome hooks report for each handler
// result, mirroring the database: a retry of the last attempt fails, and
// a cancelled or lost attempt says so whatever its handler returned.
func TestAttemptOutcome(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	retry := Resolution{Action: ActionRetry, Delay: time.Second}
	tests := []struct {
		name         string
		attempt, max int
		err          error
		res          Resolution
		cause        error
		want         skipjack.Outcome
		wantDelay    time.Duration
	}{
		{"nil completes", 1, 3, nil, Resolution{}, nil, skipjack.OutcomeCompleted, 0},
		{"cancelled while running fails even with nil", 1, 3, nil, Resolution{}, skipjack.ErrCancelled, skipjack.OutcomeCancelled, 0},
		{"a lost lease drops nil too", 1, 3, nil, Resolution{}, skipjack.ErrLeaseLost, skipjack.OutcomeLeaseLost, 0},
		{"error retries", 2, 3, boom, retry, nil, skipjack.OutcomeRetried, time.Second},
		{"last attempt fails", 3, 3, boom, retry, nil, skipjack.OutcomeFailed, 0},
		{"over the last attempt fails", 4, 3, boom, retry, nil, skipjack.OutcomeFailed, 0},
		{"snooze", 3, 3, boom, Resolution{Action: ActionSnooze, Delay: time.Minute}, nil, skipjack.OutcomeSnoozed, time.Minute},
		{"permanent", 1, 3, boom, Resolution{Action: ActionFail}, nil, skipjack.OutcomeFailed, 0},
		{"cancelled", 1, 3, boom, retry, skipjack.ErrCancelled, skipjack.OutcomeCancelled, 0},
		{"lease lost", 1, 3, boom, retry, skipjack.ErrLeaseLost, skipjack.OutcomeLeaseLost, 0},
		{"shutdown cancel is an ordinary error", 1, 3, boom, retry, context.Canceled, skipjack.OutcomeRetried, time.Second},
	}
	for _, tc := range tests {
		got, delay := attemptOutcome(tc.attempt, tc.max, tc.err, tc.res, tc.cause)
		if got != tc.want || delay != tc.wantDelay {
			t.Errorf("%s: got %s after %v, want %s after %v", tc.name, got, delay, tc.want, tc.wantDelay)
		}
	}
}
