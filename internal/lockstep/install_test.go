package lockstep

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjacktest"
)

func TestMain(m *testing.M) { os.Exit(skipjacktest.Main(m)) }

// installTimeout bounds each go command of the install test. The first
// build of the CLI at a new version compiles sqlc's parser unless the build
// cache has it (about 2.5 minutes on 2 cores).
const installTimeout = 10 * time.Minute

// userYAML is the service's skipjack.yaml.
const userYAML = `version: 1
out: ./internal/jobs
queues:
  send_email:
    payload:
      to: string
      subject: string
    max_attempts: 5
`

// userMain mounts the dashboard, enqueues five jobs and works them with the
// generated package, applying the migrations first when $MIGRATE is set.
const userMain = `package main

//go:generate %s

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/skipjack-dev/skipjack/dashboard"
	skipjack "github.com/skipjack-dev/skipjack/runtime"

	"example.com/shopper/internal/jobs"
	"example.com/shopper/internal/jobs/sendemail"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	if os.Getenv("MIGRATE") != "" {
		if err := jobs.Migrate(ctx, pool); err != nil {
			return err
		}
	}
	dash, err := dashboard.New(dashboard.Config{Queues: []skipjack.QueueAdmin{sendemail.Admin(pool)}})
	if err != nil {
		return err
	}
	http.NewServeMux().Handle("/admin/jobs/", http.StripPrefix("/admin/jobs", dash))
	const n = 5
	for i := range n {
		if _, err := sendemail.Enqueue(ctx, pool, sendemail.Payload{To: strconv.Itoa(i) + "@example.com", Subject: "hi"}); err != nil {
			return err
		}
	}
	work, stop := context.WithCancel(ctx)
	defer stop()
	var done atomic.Int64
	w := sendemail.NewWorker(pool, func(context.Context, *sendemail.Job) error {
		if done.Add(1) == n {
			stop()
		}
		return nil
	}, skipjack.WorkerConfig{PollInterval: 50 * time.Millisecond})
	if err := w.Run(work); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("worked %%d of %%d jobs in a minute", done.Load(), n)
	}
	fmt.Printf("worked %%d jobs\n", done.Load())
	return nil
}
`

// TestInstallAsUser installs skipjack as a user does, from a module proxy,
// in a fresh module outside the repository with no replace and no go.work,
// by both routes the README documents: go run pkg@version from a
// //go:generate line, and go tool with a separate tools modfile. Each
// service generates its queue package, goes through go mod tidy, builds,
// migrates (the generated Migrate, or the CLI's migrate), works five jobs
// against PostgreSQL, and links the runtime only: never sqlc, never
// chromedp.
//
// The proxy is a file-system one (Publish) holding the checkout's published
// modules at TestVersion, a version unique to their content, because the
// module cache shared with every other build keeps a version forever;
// third-party modules come from $GOPROXY through that same cache, so only
// the repository's own packages (and the final links) are built afresh.
func TestInstallAsUser(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH: this test installs skipjack with it as a user would")
	}
	mods, err := Load(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	release, err := Check(mods[0].Dir, mods)
	if err != nil {
		// Go on: what the go command says about such modules is the point.
		t.Errorf("the modules are not releasable in lockstep:\n%v", err)
		release = "v0.0.0"
	}
	version, err := TestVersion(mods, release)
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	if err := Publish(proxy, mods, version); err != nil {
		t.Fatal(err)
	}
	env, err := ProxyEnv(proxy, mods)
	if err != nil {
		t.Fatal(err)
	}
	env = withGOFLAGS(t, env, "-mod=mod")
	t.Logf("the modules are served at %s from %s", version, proxy)

	const cli = "github.com/skipjack-dev/skipjack/cmd/skipjack"
	const runtime = "github.com/skipjack-dev/skipjack/runtime"

	// Both routes build the same CLI at the same version; they run one
	// after the other so that the second finds it in the build cache.
	t.Run("go run", func(t *testing.T) {
		u := newUserModule(t, env, fmt.Sprintf("go run %s@%s generate", cli, version))
		u.goCmd("mod", "init", "example.com/shopper")
		u.goCmd("get", runtime+"@"+version)
		u.goCmd("generate", "./...")
		u.goCmd("mod", "tidy")
		u.build()
		if got := strings.TrimSpace(u.goCmd("run", cli+"@"+version, "version")); got != version {
			t.Errorf("skipjack version = %q; want %q", got, version)
		}
		if out := u.service(t, "MIGRATE=1"); !strings.Contains(out, "worked 5 jobs") {
			t.Errorf("the service said %q; want it to have worked 5 jobs", out)
		}
	})
	t.Run("go tool", func(t *testing.T) {
		u := newUserModule(t, env, "go tool -modfile=tools.mod skipjack generate")
		u.goCmd("mod", "init", "example.com/shopper")
		// The tools modfile is the same module with other requirements:
		// its path is the module's, or tidy would take the module's
		// packages for another's.
		u.goCmd("mod", "init", "-modfile=tools.mod", "example.com/shopper")
		u.goCmd("get", "-tool", "-modfile=tools.mod", cli+"@"+version)
		u.goCmd("get", runtime+"@"+version)
		u.goCmd("generate", "./...")
		u.goCmd("mod", "tidy")
		u.goCmd("mod", "tidy", "-modfile=tools.mod")
		u.build()
		if got := strings.TrimSpace(u.goCmd("tool", "-modfile=tools.mod", "skipjack", "version")); got != version {
			t.Errorf("go tool skipjack version = %q; want %q", got, version)
		}
		gomod, err := os.ReadFile(filepath.Join(u.dir, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(gomod), "sqlc") {
			t.Errorf("the service's go.mod names sqlc; the tools modfile should hold it:\n%s", gomod)
		}
		db := skipjacktest.NewDatabase(t)
		u.goCmd("tool", "-modfile=tools.mod", "skipjack", "migrate", "--database-url", db)
		if out := u.serviceOn(t, db); !strings.Contains(out, "worked 5 jobs") {
			t.Errorf("the service said %q; want it to have worked 5 jobs", out)
		}
	})
}

// userModule is a fresh module in a temporary folder, outside the
// repository and any go.work.
type userModule struct {
	t   *testing.T
	dir string
	env []string
}

// newUserModule writes the service's skipjack.yaml and main.go, whose
// //go:generate line runs generate.
func newUserModule(t *testing.T, env []string, generate string) *userModule {
	t.Helper()
	u := &userModule{t: t, dir: t.TempDir(), env: env}
	for name, data := range map[string]string{
		"skipjack.yaml": userYAML,
		"main.go":       fmt.Sprintf(userMain, generate),
	} {
		if err := os.WriteFile(filepath.Join(u.dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// goCmd runs the go command in the module and returns its stdout.
func (u *userModule) goCmd(args ...string) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.t.Context(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = u.dir
	cmd.Env = u.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		u.t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	u.t.Logf("go %s (%v)", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond))
	return string(out)
}

// build builds the service and checks that it links the runtime and the
// dashboard, and that neither the generator's sqlc nor the dashboard's
// browser test driver (chromedp) is in its module graph, let alone its
// binary.
func (u *userModule) build() {
	u.t.Helper()
	u.goCmd("build", "-o", filepath.Join(u.dir, "service"), ".")
	deps := strings.Fields(u.goCmd("list", "-deps", "."))
	for _, p := range []string{"github.com/skipjack-dev/skipjack/runtime", "github.com/skipjack-dev/skipjack/dashboard"} {
		if !slices.Contains(deps, p) {
			u.t.Errorf("the service does not link %s; its packages:\n%s", p, strings.Join(deps, "\n"))
		}
	}
	graph := strings.Fields(u.goCmd("list", "-m", "-f", "{{.Path}}", "all"))
	for _, list := range []struct {
		what  string
		items []string
	}{{"links", deps}, {"has in its module graph", graph}} {
		for _, d := range list.items {
			if strings.HasPrefix(d, "github.com/sqlc-dev/") || strings.HasPrefix(d, "github.com/chromedp/") {
				u.t.Errorf("the service %s %s", list.what, d)
			}
		}
	}
}

// service runs the built service on a fresh database with extra
// environment variables and returns its output.
func (u *userModule) service(t *testing.T, env ...string) string {
	t.Helper()
	return u.serviceOn(t, skipjacktest.NewDatabase(t), env...)
}

// serviceOn runs the built service on the database at url.
func (u *userModule) serviceOn(t *testing.T, url string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(u.dir, "service"))
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+url), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the service: %v\n%s", err, out)
	}
	return string(out)
}

// withGOFLAGS returns env with flags added to GOFLAGS (which may come from
// the environment or from go env -w).
func withGOFLAGS(t *testing.T, env []string, flags string) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") })
	return append(env, strings.TrimSpace("GOFLAGS="+strings.TrimSpace(string(out))+" "+flags))
}
