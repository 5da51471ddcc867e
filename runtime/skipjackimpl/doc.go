// Package skipjackimpl is the engine behind the packages skipjack
// generates: the queue binding (Queue, NewQueue), the worker (claims,
// handlers, batched results, liveness, rescue, pruning, periodic slots),
// the shared LISTEN connection and the migration applier.
//
// It is for generated code only. Its API follows what the generator of
// the same version emits and is outside the compatibility promises of
// the module: applications import package skipjack
// (github.com/skipjack-dev/skipjack/runtime) and their generated queue
// packages, never this one. skipjack.SupportPackageIsVersionN, which
// every generated package references, names the version of generated code
// this package serves.
package skipjackimpl
