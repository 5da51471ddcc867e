// Package lockstep knows the repository's Go modules and how they are
// released: together, at one version. The published modules (the root,
// runtime, dashboard and otel) are tagged vX.Y.Z, runtime/vX.Y.Z,
// dashboard/vX.Y.Z and otel/vX.Y.Z from one commit, and every module of
// the repository requires the others at exactly that version, with no
// replace directive: go.work joins them for development.
//
// The package rewrites those requirements (SetVersion), checks that they
// agree (Check), and serves the published modules from a file-system
// module proxy (Publish), so that a test can install them as a user does.
package lockstep

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// published are the folders, relative to the repository root, of the
// modules users download. The release tags each at the same version, the
// root as vX.Y.Z and the others as <folder>/vX.Y.Z.
var published = []string{".", "runtime", "dashboard", "otel"}

// A Module is one module of the repository's go.work.
type Module struct {
	// Dir is the module's folder, absolute.
	Dir string
	// Rel is Dir relative to the repository root, slash-separated: "." for
	// the root module.
	Rel string
	// Path is the module path its go.mod declares.
	Path string
	// Published: users download the module, so it is tagged at every
	// release and its go.mod may not replace anything.
	Published bool
}

// TagPrefix is what the module's release tags start with: "" for the root
// module, "runtime/" for the runtime.
func (m Module) TagPrefix() string {
	if m.Rel == "." {
		return ""
	}
	return m.Rel + "/"
}

// GoMod is the path of the module's go.mod.
func (m Module) GoMod() string { return filepath.Join(m.Dir, "go.mod") }

// Load reads the modules that root's go.work uses, in go.work's order. It
// fails when a published module is missing from go.work.
func Load(root string) ([]Module, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, u := range work.Use {
		dir := filepath.Join(root, filepath.FromSlash(u.Path))
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		gomod := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return nil, err
		}
		f, err := modfile.ParseLax(gomod, data, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s: no module line", gomod)
		}
		rel = filepath.ToSlash(rel)
		mods = append(mods, Module{Dir: dir, Rel: rel, Path: f.Module.Mod.Path, Published: slices.Contains(published, rel)})
	}
	for _, p := range published {
		if !slices.ContainsFunc(mods, func(m Module) bool { return m.Rel == p }) {
			return nil, fmt.Errorf("%s: the published module in %s is not in go.work's use list", name, p)
		}
	}
	return mods, nil
}

// paths returns the module paths of mods that are published.
func paths(mods []Module) map[string]bool {
	ps := map[string]bool{}
	for _, m := range mods {
		if m.Published {
			ps[m.Path] = true
		}
	}
	return ps
}

// SetVersion returns the go.mod data (read from file, named in errors)
// with every requirement on a published module of mods set to version.
func SetVersion(file string, data []byte, mods []Module, version string) ([]byte, error) {
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, err
	}
	ours := paths(mods)
	for _, r := range f.Require {
		if ours[r.Mod.Path] {
			if err := f.AddRequire(r.Mod.Path, version); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
		}
	}
	return f.Format()
}

// SetVersionAll rewrites the go.mod of every module in mods so that its
// requirements on the published modules name version, and root's go.work
// so that it replaces each published module at version with its folder.
func SetVersionAll(root string, mods []Module, version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("%q is not a canonical semantic version like v1.2.3", version)
	}
	if err := setWorkVersion(root, mods, version); err != nil {
		return err
	}
	for _, m := range mods {
		data, err := os.ReadFile(m.GoMod())
		if err != nil {
			return err
		}
		out, err := SetVersion(m.GoMod(), data, mods, version)
		if err != nil {
			return err
		}
		if string(out) != string(data) {
			if err := os.WriteFile(m.GoMod(), out, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// setWorkVersion rewrites root's go.work so that it replaces each published
// module at version, and no other version, with its folder.
//
// The workspace needs these lines: go.work makes its modules the roots of
// the module graph, but a requirement on one of them at a version is still
// an edge to that version, whose go.mod the go command fetches. Before the
// version is tagged there is none to fetch; after, it would bring the
// tagged go.mod's requirements into a graph that should be the checkout's.
func setWorkVersion(root string, mods []Module, version string) error {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return err
	}
	folders := map[string]string{} // module path -> folder, as go.work names it
	for _, m := range mods {
		if m.Published {
			folders[m.Path] = workFolder(m)
		}
	}
	for _, r := range slices.Clone(work.Replace) {
		folder, ok := folders[r.Old.Path]
		if !ok {
			continue
		}
		// Rewrite the line in place, so that it keeps its block and comments.
		arrow := slices.Index(r.Syntax.Token, "=>")
		if arrow < 1 {
			return fmt.Errorf("%s:%d: cannot read this replace", name, r.Syntax.Start.Line)
		}
		head := r.Syntax.Token[:arrow]
		if head[len(head)-1] != r.Old.Path { // a versioned replace
			head = head[:len(head)-1]
		}
		r.Syntax.Token = append(slices.Clone(head), version, "=>", folder)
		delete(folders, r.Old.Path)
	}
	for _, m := range mods {
		if _, todo := folders[m.Path]; todo {
			if err := work.AddReplace(m.Path, version, workFolder(m), ""); err != nil {
				return err
			}
		}
	}
	out := modfile.Format(work.Syntax)
	if string(out) == string(data) {
		return nil
	}
	return os.WriteFile(name, out, 0o644)
}

// workFolder is m's folder as go.work's replace names it.
func workFolder(m Module) string {
	if m.Rel == "." {
		return "./"
	}
	return "./" + m.Rel
}

// checkWork reports how root's go.work fails to replace each published
// module at version, and no other version, with its folder.
func checkWork(root string, mods []Module, version string) ([]string, error) {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	var problems []string
	want := map[string]string{} // path -> folder
	for _, m := range mods {
		if m.Published {
			want[m.Path] = workFolder(m)
		}
	}
	for _, r := range work.Replace {
		folder, ok := want[r.Old.Path]
		if !ok {
			continue
		}
		if r.Old.Version != version || path.Clean(r.New.Path) != path.Clean(folder) {
			problems = append(problems, fmt.Sprintf("go.work:%d: replace %s %s => %s; want %s %s => %s", r.Syntax.Start.Line, r.Old.Path, r.Old.Version, r.New.Path, r.Old.Path, version, folder))
		}
		delete(want, r.Old.Path)
	}
	for p, folder := range want {
		problems = append(problems, fmt.Sprintf("go.work: no replace %s %s => %s (the workspace would fetch the tagged %s)", p, version, folder, version))
	}
	slices.Sort(problems)
	return problems, nil
}

// Check returns the one version at which the modules of root's go.work
// require each other. Its error lists every disagreement: two versions, a
// replace directive in a published module (go run pkg@version and go
// install refuse those), a replace of a published module in any go.mod
// (go.work joins them), or a go.work that does not replace each published
// module at that version with its folder.
func Check(root string, mods []Module) (version string, err error) {
	ours := paths(mods)
	var problems []string
	seen := map[string][]string{} // version -> "file requires path"
	for _, m := range mods {
		data, err := os.ReadFile(m.GoMod())
		if err != nil {
			return "", err
		}
		rel := path.Join(m.Rel, "go.mod")
		f, err := modfile.Parse(rel, data, nil)
		if err != nil {
			return "", err
		}
		for _, r := range f.Require {
			if ours[r.Mod.Path] {
				seen[r.Mod.Version] = append(seen[r.Mod.Version], fmt.Sprintf("%s:%d: requires %s %s", rel, r.Syntax.Start.Line, r.Mod.Path, r.Mod.Version))
			}
		}
		for _, r := range f.Replace {
			switch {
			case m.Published:
				problems = append(problems, fmt.Sprintf("%s:%d: replace %s in a published module (go run and go install refuse it; go.work joins the modules)", rel, r.Syntax.Start.Line, r.Old.Path))
			case ours[r.Old.Path]:
				problems = append(problems, fmt.Sprintf("%s:%d: replace %s (go.work joins the repository's modules)", rel, r.Syntax.Start.Line, r.Old.Path))
			}
		}
	}
	var versions []string
	for v := range seen {
		versions = append(versions, v)
	}
	slices.SortFunc(versions, semver.Compare)
	switch len(versions) {
	case 0:
		problems = append(problems, "no module requires another: nothing says which version the modules are released at")
	case 1:
		version = versions[0]
		if !semver.IsValid(version) || semver.Prerelease(version) != "" || semver.Build(version) != "" {
			problems = append(problems, fmt.Sprintf("the modules require each other at %s, not a release version like v1.2.3", version))
		}
	default:
		problems = append(problems, fmt.Sprintf("the modules require each other at %d versions (%s); release them in lockstep at one:", len(versions), strings.Join(versions, ", ")))
		for _, v := range versions {
			for _, s := range seen[v] {
				problems = append(problems, "\t"+s)
			}
		}
	}
	if version != "" {
		p, err := checkWork(root, mods, version)
		if err != nil {
			return "", err
		}
		problems = append(problems, p...)
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "\n"))
	}
	return version, nil
}
