package generator_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPayloadEvolution generates golden/evolution's version 1, edits the
// YAML to version 2 (v2.yaml: every change one that check accepts) and
// generates again, which must pass the breaking-change check against the
// lock version 1 wrote. It then runs the case's decode test in the module:
// the corpus payloads.jsonl, written by the package generated from
// version 1, must decode with version 2's Payload to the same values.
func TestPayloadEvolution(t *testing.T) {
	t.Parallel()
	dir := newCaseModule(t, "evolution")
	generateAndWrite(t, dir)
	v2, err := os.ReadFile(filepath.Join(dir, "v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "skipjack.yaml"), string(v2))
	out := generateAndWrite(t, dir)
	if len(out.AllowedBreaking) > 0 {
		t.Fatalf("version 2 generated with breaking changes: %v", out.AllowedBreaking)
	}
	goCmd(t, dir, "mod", "tidy")
	goCmd(t, dir, "test", "-count=1", "./...")
}
