package main

import "runtime/debug"

// version is the version of the module the binary was built from, as the
// go command recorded it: the tag or pseudo-version named by go run
// pkg@version, go install pkg@version or go tool, and "(devel)" when built
// from a checkout without version control stamping.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" {
		return "(devel)"
	}
	return info.Main.Version
}
