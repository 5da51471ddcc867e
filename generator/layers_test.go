package generator

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsRunDown checks the root module's floors with go list -deps:
// the packages under the root internal/ are leaves that import nothing of
// ours, and nothing under generator/ imports the CLI. A package that only
// the CLI uses and that needs the generator (tableadmin) lives under
// cmd/skipjack/internal/.
func TestImportsRunDown(t *testing.T) {
	t.Parallel()
	const module = "github.com/skipjack-dev/skipjack/"
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "./internal/...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/...: %v", err)
	}
	for p := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"internal/") {
			t.Errorf("a package under internal/ depends on %s: internal/ holds leaves; move the package under its one user", p)
		}
	}
	cmd = exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "./generator/...")
	cmd.Dir = ".."
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go list -deps ./generator/...: %v", err)
	}
	for p := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(p, module+"cmd/") {
			t.Errorf("the generator depends on %s, a package of the CLI above it", p)
		}
	}
}
