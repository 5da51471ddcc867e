package compat

// LockHeader exposes line 1 of the lock file to the external tests, which
// write lock files of their own.
const LockHeader = lockHeader
