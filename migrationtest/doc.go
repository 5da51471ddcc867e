// Package migrationtest holds end-to-end tests of the skipjack CLI against
// PostgreSQL: `skipjack migrate` and `skipjack stats` on fresh databases,
// and schema evolution in every migration format (plain, goose,
// golang-migrate, tern), applied up and down with each format's real tool
// through its Go library.
//
// It is a module of its own so that the migration tools' dependencies stay
// out of the generator's and the runtime's go.mod. The tests build the CLI
// once from the repository's root module and run it as a subprocess in
// temporary Go modules that use the repository's runtime.
package migrationtest
