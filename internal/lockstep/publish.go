package lockstep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// TestVersion returns a version at which Publish can serve the checkout's
// modules without ever meeting another content under the same name: the
// go command's module cache keeps a downloaded version forever, so a
// version that named whatever the checkout holds today would serve
// yesterday's content tomorrow. It is the pseudo-version a commit after
// the release would have (v0.1.1-0.<time>-<hash> after v0.1.0), with the
// time of the last commit (or now, outside git) and a hash of the content
// of every file that Publish would read, committed or not.
func TestVersion(mods []Module, release string) (string, error) {
	if !semver.IsValid(release) || semver.Prerelease(release) != "" {
		return "", fmt.Errorf("%q is not a release version", release)
	}
	h := sha256.New()
	for _, m := range mods {
		if !m.Published {
			continue
		}
		files, err := moduleFiles(m.Dir)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "module %s\n", m.Rel)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(m.Dir, filepath.FromSlash(f)))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(data))
		}
	}
	rev := hex.EncodeToString(h.Sum(nil))[:12]
	return module.PseudoVersion(semver.Major(release), release, commitTime(mods[0].Dir), rev), nil
}

// commitTime is the time of the last commit of the repository holding
// dir, or now outside one.
func commitTime(dir string) time.Time {
	out, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%ct").Output()
	if err == nil {
		if sec, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

// Publish writes the published modules of mods into proxyDir, laid out as
// a module proxy (GOPROXY=file://<proxyDir>) serves them: for each, the
// zip of its folder, its go.mod, an .info, the list of versions and
// @latest, at version. Every requirement between the modules names
// version, as a release's do. The zips hold what git would commit (tracked
// and untracked files that .gitignore does not exclude), or the whole
// folder outside git; zip.Create leaves out nested modules, as the go
// command does.
func Publish(proxyDir string, mods []Module, version string) error {
	at := commitTime(mods[0].Dir)
	if t, err := module.PseudoVersionTime(version); err == nil {
		at = t
	}
	for _, m := range mods {
		if !m.Published {
			continue
		}
		if err := publish(proxyDir, m, mods, version, at); err != nil {
			return fmt.Errorf("publish %s: %w", m.Path, err)
		}
	}
	return nil
}

// publish writes one module into proxyDir.
func publish(proxyDir string, m Module, mods []Module, version string, at time.Time) error {
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxyDir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(m.GoMod())
	if err != nil {
		return err
	}
	gomod, err := SetVersion(m.GoMod(), data, mods, version)
	if err != nil {
		return err
	}
	names, err := moduleFiles(m.Dir)
	if err != nil {
		return err
	}
	var files []zip.File
	for _, name := range names {
		if name == "go.mod" {
			files = append(files, dataFile{name: name, data: gomod})
			continue
		}
		info, err := os.Lstat(filepath.Join(m.Dir, filepath.FromSlash(name)))
		if err != nil {
			return err
		}
		files = append(files, diskFile{name: name, path: filepath.Join(m.Dir, filepath.FromSlash(name)), info: info})
	}
	var z bytes.Buffer
	if err := zip.Create(&z, module.Version{Path: m.Path, Version: version}, files); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, at})
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		version + ".zip":  z.Bytes(),
		version + ".mod":  gomod,
		version + ".info": info,
		"list":            []byte(version + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(filepath.Dir(dir), "@latest"), info, 0o644)
}

// moduleFiles lists the regular files under dir, slash-separated and
// relative to it, sorted: those git would commit when dir is in a git
// work tree (tracked files and untracked ones .gitignore does not
// exclude), else all of them but .git.
func moduleFiles(dir string) ([]string, error) {
	var files []string
	out, err := exec.Command("git", "-C", dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".").Output()
	if err == nil {
		for _, name := range strings.Split(string(out), "\x00") {
			if name == "" {
				continue
			}
			// A tracked file deleted in the work tree is not content.
			if info, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); err == nil && info.Mode().IsRegular() {
				files = append(files, name)
			}
		}
	} else {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				rel, err := filepath.Rel(dir, p)
				if err != nil {
					return err
				}
				files = append(files, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(files)
	files = slices.Compact(files)
	return files, nil
}

// diskFile is a file of a module folder for zip.Create.
type diskFile struct {
	name, path string
	info       os.FileInfo
}

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.path) }

// dataFile is a file for zip.Create whose content is in memory: the
// module's go.mod as the release rewrites it.
type dataFile struct {
	name string
	data []byte
}

func (f dataFile) Path() string                 { return f.name }
func (f dataFile) Lstat() (os.FileInfo, error)  { return dataInfo{f}, nil }
func (f dataFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

// dataInfo is a dataFile's os.FileInfo.
type dataInfo struct{ f dataFile }

func (i dataInfo) Name() string       { return filepath.Base(i.f.name) }
func (i dataInfo) Size() int64        { return int64(len(i.f.data)) }
func (i dataInfo) Mode() fs.FileMode  { return 0o644 }
func (i dataInfo) ModTime() time.Time { return time.Time{} }
func (i dataInfo) IsDir() bool        { return false }
func (i dataInfo) Sys() any           { return nil }

// ProxyEnv returns the environment (os.Environ's, amended) in which the go
// command sees the published modules of mods as a user does, from the
// proxy that Publish wrote to proxyDir: without go.work, proxyDir first
// and then $GOPROXY (so third-party modules come from where they always
// do), and without asking the checksum database about the published
// modules, which it has never seen at a test version.
func ProxyEnv(proxyDir string, mods []Module) ([]string, error) {
	out, err := exec.Command("go", "env", "GOPROXY", "GONOSUMDB").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for len(lines) < 2 {
		lines = append(lines, "")
	}
	abs, err := filepath.Abs(proxyDir)
	if err != nil {
		return nil, err
	}
	goproxy := "file://" + filepath.ToSlash(abs)
	if lines[0] != "" && lines[0] != "off" {
		goproxy += "," + lines[0]
	}
	nosumdb := []string{}
	for p := range paths(mods) {
		nosumdb = append(nosumdb, p)
	}
	slices.Sort(nosumdb)
	if lines[1] != "" {
		nosumdb = append(nosumdb, lines[1])
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "GOWORK" || k == "GOPROXY" || k == "GONOSUMDB"
	})
	return append(env, "GOWORK=off", "GOPROXY="+goproxy, "GONOSUMDB="+strings.Join(nosumdb, ",")), nil
}

// DropSums returns go.sum data without the lines for the published
// modules of mods. The repository commits none: a workspace build needs
// none, and their hashes would change with every edit.
func DropSums(data []byte, mods []Module) []byte {
	ours := paths(mods)
	var b bytes.Buffer
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 0 && ours[f[0]] {
			continue
		}
		b.WriteString(line)
	}
	return b.Bytes()
}
