package migrationtest

import (
	"strings"
	"testing"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

// TestUniqueKeyOverDuplicates adds a unique key to a queue whose pending
// jobs already share it: skipjack migrate fails before building anything,
// with a message that names the queue and says where to find the
// duplicates, and leaves no index behind; once the duplicates are
// resolved, the same migration applies.
func TestUniqueKeyOverDuplicates(t *testing.T) {
	t.Parallel()
	config := func(unique string) string {
		return "version: 1\nname: dup\nout: ./internal/jobs\nmigrations:\n  dir: ./migrations\nqueues:\n  mail:\n    payload: {to: string}\n" + unique
	}
	p := newProject(t, config(""))
	dbURL := skipjacktest.NewDatabase(t)
	conn := connect(t, dbURL)
	p.ok("generate")
	p.ok("migrate", "--database-url", dbURL)
	execSQL(t, conn, `INSERT INTO skipjack.mail (payload) VALUES ('{"to": "a"}'), ('{"to": "a"}'), ('{"to": "b"}')`)

	p.write("skipjack.yaml", config("    unique: {by: [to]}\n"))
	p.ok("generate", "--allow-breaking")
	r := p.skipjack(nil, "migrate", "--database-url", dbURL)
	if r.code != 1 || !strings.Contains(r.stderr, "queue mail has jobs in states pending, running that share the new unique key") ||
		!strings.Contains(r.stderr, `"Unique jobs" in skipjack's docs/reference.md`) {
		t.Fatalf("migrate over duplicates: exit status %d, stderr %q; want 1 and the duplicate-key message", r.code, r.stderr)
	}
	const index = `SELECT count(*) FROM pg_class WHERE oid = to_regclass('skipjack.mail_unique_idx')`
	if n := queryInt(t, conn, index); n != 0 {
		t.Errorf("after the failed migration, %d mail_unique_idx exist (valid or not), want none", n)
	}

	execSQL(t, conn, `DELETE FROM skipjack.mail WHERE id = (SELECT max(id) FROM skipjack.mail WHERE payload->>'to' = 'a')`)
	p.ok("migrate", "--database-url", dbURL)
	if n := queryInt(t, conn, `SELECT count(*) FROM pg_index WHERE indexrelid = to_regclass('skipjack.mail_unique_idx') AND indisvalid`); n != 1 {
		t.Errorf("after the duplicates were resolved, %d valid mail_unique_idx, want 1", n)
	}
}
