package skipjacktest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestPrefix checks that $SKIPJACK_TEST_PREFIX names every database the
// harness creates, that a prefix which would not make a plain SQL name is
// refused, and that CreateDatabase's drop leaves nothing with the prefix.
func TestPrefix(t *testing.T) {
	tests := []struct {
		env     string
		want    string
		wantErr string
	}{
		{env: "", want: skipjacktest.DefaultPrefix},
		{env: "ops7_", want: "ops7_"},
		{env: "Bad-Prefix", wantErr: `$SKIPJACK_TEST_PREFIX "Bad-Prefix" is not a prefix of lowercase SQL names`},
		{env: "9lives_", wantErr: `$SKIPJACK_TEST_PREFIX "9lives_" is not a prefix`},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(skipjacktest.PrefixEnv, tt.env)
			ctx := context.Background()
			dbURL, drop, err := skipjacktest.CreateDatabase(ctx, "prefix_")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CreateDatabase with prefix %q: %v, want an error containing %q", tt.env, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := dbName(t, dbURL)
			if !strings.HasPrefix(name, tt.want+"prefix_") {
				t.Errorf("database %q does not start with %q", name, tt.want+"prefix_")
			}
			if err := drop(ctx); err != nil {
				t.Fatal(err)
			}
			base, err := skipjacktest.ServerURL()
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, base)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("database %s still exists after drop", name)
			}
		})
	}
}
