package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/skipjack-dev/skipjack/generator"
	"github.com/skipjack-dev/skipjack/generator/config"
)

// runInModule runs migrate or stats through the user's own generated code:
// it writes a tiny main package into a hidden folder under out, runs it with
// `go run` in the config's module and removes it. So `skipjack migrate`
// runs exactly the Migrate that the application links, with the runtime
// version the application's go.mod selects.
func runInModule(cmd, file, dbURL string, asJSON bool, e env) error {
	cfg, out, err := load(file, e)
	if err != nil {
		return err
	}
	problems, err := generator.Check(cfg.Dir, out)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("generated code is out of date (%s: %s); run skipjack generate first", problems[0].Path, problems[0].Kind)
	}
	src, err := programSource(cmd, cfg, out, asJSON)
	if err != nil {
		return err
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	dir := filepath.Join(cfg.Dir, filepath.FromSlash(out.Out), ".skipjack-"+cmd+"-"+hex.EncodeToString(suffix[:]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		return err
	}
	rel, err := filepath.Rel(cfg.Dir, dir)
	if err != nil {
		return err
	}
	c := exec.Command("go", "run", "./"+filepath.ToSlash(rel))
	c.Dir = cfg.Dir
	c.Env = append(os.Environ(), "SKIPJACK_DATABASE_URL="+dbURL)
	c.Stdout, c.Stderr = e.stdout, e.stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s failed: %w", cmd, err)
	}
	return nil
}

type programQueue struct{ Name, Package, Import string }

var programTmpl = template.Must(template.New("program").Parse(`// Command {{.Cmd}} is a temporary program written by skipjack {{.Cmd}}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
{{- if eq .Cmd "migrate"}}
	shared "{{.Import}}"
{{- else}}
	skipjack "github.com/skipjack-dev/skipjack/runtime"
{{- range $i, $q := .Queues}}
	q{{$i}} "{{$q.Import}}"
{{- end}}
{{- end}}
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("SKIPJACK_DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipjack {{.Cmd}}:", err)
		os.Exit(1)
	}
	defer pool.Close()
{{- if eq .Cmd "migrate"}}
	if err := shared.Migrate(ctx, pool); err != nil {
		fmt.Fprintln(os.Stderr, "skipjack migrate:", err)
		os.Exit(1)
	}
	fmt.Println("skipjack migrate: {{.Config}} is up to date")
	_ = json.Marshal
{{- else}}
	type row struct {
		Queue string ` + "`json:\"queue\"`" + `
		skipjack.Stats
	}
	var rows []row
{{- range $i, $q := .Queues}}
	if s, err := q{{$i}}.Stats(ctx, pool); err != nil {
		fmt.Fprintln(os.Stderr, "skipjack stats: {{$q.Name}}:", err)
		os.Exit(1)
	} else {
		rows = append(rows, row{Queue: "{{$q.Name}}", Stats: s})
	}
{{- end}}
{{- if .JSON}}
	out, _ := json.MarshalIndent(rows, "", "  ")
	fmt.Println(string(out))
{{- else}}
	fmt.Printf("%-40s %10s %10s %10s %10s %10s %14s\n", "QUEUE", "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "OLDEST")
	for _, r := range rows {
		fmt.Printf("%-40s %10d %10d %10d %10d %10d %14v\n", r.Queue, r.Pending, r.Scheduled, r.Running, r.Completed, r.Failed, r.OldestPending)
	}
	_ = json.Marshal
{{- end}}
{{- end}}
}
`))

func programSource(cmd string, cfg *config.Config, out *generator.Output, asJSON bool) ([]byte, error) {
	data := struct {
		Cmd, Import, Config string
		JSON                bool
		Queues              []programQueue
	}{Cmd: cmd, Import: out.Import, Config: cfg.Name, JSON: asJSON}
	for _, q := range cfg.LiveQueues() {
		data.Queues = append(data.Queues, programQueue{Name: q.Name, Package: q.Package, Import: out.Import + "/" + q.Package})
	}
	var b strings.Builder
	if err := programTmpl.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("render %s program: %w", cmd, err)
	}
	return []byte(b.String()), nil
}
