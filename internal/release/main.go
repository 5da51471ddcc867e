// Command release keeps the repository's modules releasable in lockstep
// (see RELEASING.md). Run it from anywhere in the repository:
//
//	go run ./internal/release set vX.Y.Z   # every module requires the others at vX.Y.Z
//	go run ./internal/release check        # they agree, no replace; each module is tidy alone
//	go run ./internal/release tidy         # go mod tidy each module alone
//	go run ./internal/release publish DIR  # serve the modules from a file proxy in DIR
//	go run ./internal/release api [-w]     # the exported API against api/*.txt
//
// "Alone" means as the go command sees a module outside the repository's
// go.work, the way a user's build does: the other modules come from a
// file-system module proxy holding the checkout at a version unique to its
// content (lockstep.TestVersion), third-party modules from $GOPROXY. A
// require that go.work hides is missing there, and check names it.
//
// Exit status: 0 ok, 1 a check failed, 2 a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/aymanbagabas/go-udiff"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/skipjack-dev/skipjack/internal/lockstep"
)

const usage = `usage: go run ./internal/release <command>

commands:
  set VERSION   make every module require the others at VERSION (vX.Y.Z)
  check         check that the modules require each other at one release
                version, that no published go.mod has a replace, and that each
                module is tidy on its own (outside go.work)
  tidy          run go mod tidy in each module on its own, with the other
                modules served at the checkout's content
  api [-w]      compare the exported API of the runtime, the dashboard and the
                generated code (examples/shop's) with api/*.txt, and fail on
                any difference; -w writes the files instead
  publish DIR   write the published modules into DIR as a module proxy
                (GOPROXY=file://DIR) at a version unique to the checkout's
                content, and print that version
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// errUsage marks a usage error.
var errUsage = errors.New("usage")

func run(args []string) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := dispatch(fs.Args())
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprint(os.Stderr, usage)
		return 2
	case err != nil:
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		return 1
	}
	return 0
}

func dispatch(args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := repoRoot(wd)
	if err != nil {
		return err
	}
	mods, err := lockstep.Load(root)
	if err != nil {
		return err
	}
	switch cmd, args := args[0], args[1:]; {
	case cmd == "set" && len(args) == 1:
		return lockstep.SetVersionAll(root, mods, args[0])
	case cmd == "check" && len(args) == 0:
		version, err := lockstep.Check(root, mods)
		if err != nil {
			return err
		}
		fmt.Printf("every module requires the others at %s; no published go.mod replaces anything\n", version)
		return alone(mods, version, false)
	case cmd == "tidy" && len(args) == 0:
		version, err := lockstep.Check(root, mods)
		if err != nil {
			return err
		}
		return alone(mods, version, true)
	case cmd == "api" && len(args) == 0:
		return checkAPI(root, false)
	case cmd == "api" && len(args) == 1 && args[0] == "-w":
		return checkAPI(root, true)
	case cmd == "publish" && len(args) == 1:
		version, err := lockstep.Check(root, mods)
		if err != nil {
			return err
		}
		test, err := lockstep.TestVersion(mods, version)
		if err != nil {
			return err
		}
		if err := lockstep.Publish(args[0], mods, test); err != nil {
			return err
		}
		fmt.Println(test)
		return nil
	}
	return errUsage
}

// repoRoot is the folder above dir that holds go.work.
func repoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work at or above %s", dir)
		}
	}
}

// alone runs go mod tidy on every module as the go command sees it outside
// go.work, with the published modules served at the checkout's content.
// With write it keeps the result; without, it reports every module whose
// go.mod or go.sum would change.
func alone(mods []lockstep.Module, release string, write bool) error {
	test, err := lockstep.TestVersion(mods, release)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "skipjack-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxy := filepath.Join(tmp, "proxy")
	if err := lockstep.Publish(proxy, mods, test); err != nil {
		return err
	}
	env, err := lockstep.ProxyEnv(proxy, mods)
	if err != nil {
		return err
	}
	workspace, err := workspaceVersions(mods[0].Dir)
	if err != nil {
		return err
	}
	var untidy []string
	for i, m := range mods {
		alone := filepath.Join(tmp, fmt.Sprint(i))
		if err := os.Mkdir(alone, 0o755); err != nil {
			return err
		}
		gotMod, gotSum, err := tidy(m, mods, workspace, release, test, alone, env)
		if err != nil {
			return err
		}
		wantMod, err := os.ReadFile(m.GoMod())
		if err != nil {
			return err
		}
		wantSum, err := readSum(m, mods)
		if err != nil {
			return err
		}
		if string(gotMod) == string(wantMod) && string(gotSum) == string(wantSum) {
			continue
		}
		if write {
			if err := os.WriteFile(m.GoMod(), gotMod, 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(m.Dir, "go.sum"), gotSum, 0o644); err != nil {
				return err
			}
			fmt.Printf("tidied %s\n", filepath.Join(m.Rel, "go.mod"))
			continue
		}
		untidy = append(untidy, fmt.Sprintf("%s:\n%s%s", m.Rel, diff(filepath.Join(m.Rel, "go.mod"), wantMod, gotMod), diff(filepath.Join(m.Rel, "go.sum"), wantSum, gotSum)))
	}
	if len(untidy) > 0 {
		return fmt.Errorf("modules that go mod tidy changes outside go.work (a missing require, an untidy go.mod, or a requirement below the version the workspace builds with); run go run ./internal/release tidy:\n%s", strings.Join(untidy, "\n"))
	}
	if !write {
		fmt.Printf("every module is tidy on its own (the published ones served as %s)\n", test)
	}
	return nil
}

// tidy runs go mod tidy on a copy of m's go.mod and go.sum in dir, with the
// requirements on the published modules at test and every other one at
// least at the version the workspace selects, and returns them as they
// would be committed: those requirements back at release, go.sum without
// the lines for the published modules (whose hashes change with every
// edit; a workspace build needs none).
//
// Raising the requirements makes a module alone, as a user's build sees
// it, select the very versions its tests ran with in the workspace (where
// the other modules' requirements count too), and lets the install test
// reuse the workspace's compiled packages, sqlc's among them.
func tidy(m lockstep.Module, mods []lockstep.Module, workspace map[string]string, release, test, dir string, env []string) (gotMod, gotSum []byte, err error) {
	data, err := os.ReadFile(m.GoMod())
	if err != nil {
		return nil, nil, err
	}
	data, err = lockstep.SetVersion(m.GoMod(), data, mods, test)
	if err != nil {
		return nil, nil, err
	}
	sum, err := readSum(m, mods)
	if err != nil {
		return nil, nil, err
	}
	modFile := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		return nil, nil, err
	}
	// Tidy may add requirements below the workspace's versions: raise and
	// tidy again until nothing moves (twice in practice).
	for range 4 {
		raised, err := raise(m.GoMod(), data, workspace)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(modFile, raised, 0o644); err != nil {
			return nil, nil, err
		}
		cmd := exec.Command("go", "mod", "tidy", "-modfile="+modFile)
		cmd.Dir = m.Dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("go mod tidy in %s outside go.work: %v\n%s", m.Rel, err, out)
		}
		tidied, err := os.ReadFile(modFile)
		if err != nil {
			return nil, nil, err
		}
		if again, err := raise(m.GoMod(), tidied, workspace); err != nil {
			return nil, nil, err
		} else if string(again) == string(tidied) {
			data = tidied
			break
		}
		data = tidied
	}
	if gotMod, err = lockstep.SetVersion(m.GoMod(), data, mods, release); err != nil {
		return nil, nil, err
	}
	sum, err = os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, err
	}
	return gotMod, lockstep.DropSums(sum, mods), nil
}

// raise returns go.mod data with every requirement below the version the
// workspace selects raised to it.
func raise(file string, data []byte, workspace map[string]string) ([]byte, error) {
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, err
	}
	for _, r := range f.Require {
		if v, ok := workspace[r.Mod.Path]; ok && semver.Compare(v, r.Mod.Version) > 0 {
			if err := f.AddRequire(r.Mod.Path, v); err != nil {
				return nil, err
			}
		}
	}
	return f.Format()
}

// workspaceVersions returns the version of every module in the build list
// of the workspace at root, but the workspace's own.
func workspaceVersions(root string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{if not .Main}}{{.Path}} {{.Version}}{{end}}", "all")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all in the workspace: %w", err)
	}
	vs := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && semver.IsValid(v) {
			vs[path] = v
		}
	}
	return vs, nil
}

// readSum reads m's go.sum without the lines for the published modules;
// a missing go.sum reads as empty.
func readSum(m lockstep.Module, mods []lockstep.Module) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(m.Dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return lockstep.DropSums(data, mods), nil
}

// diff is a unified diff of a file's committed and tidy content, or "" when
// they are equal.
func diff(name string, want, got []byte) string {
	if string(want) == string(got) {
		return ""
	}
	return udiff.Unified(name+" (committed)", name+" (tidy outside go.work)", string(want), string(got))
}
