package skipjacktest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// PrefixEnv names the environment variable that sets the prefix of every
// database and role that skipjack's tests, its example and its benchmark
// create on the server, so that a shared server can tell them apart from
// everything else (and clean up after a killed run with one query over
// pg_database). Default DefaultPrefix.
const PrefixEnv = "SKIPJACK_TEST_PREFIX"

// DefaultPrefix is the prefix when $SKIPJACK_TEST_PREFIX is unset.
const DefaultPrefix = "skipjacktest_"

// validPrefix keeps every name built on a prefix a plain lowercase SQL
// identifier well under the 63-byte limit.
var validPrefix = regexp.MustCompile(`^[a-z][a-z0-9_]{0,23}$`)

// Prefix returns the prefix of the databases and roles created on the
// server: $SKIPJACK_TEST_PREFIX, or DefaultPrefix when it is unset or
// empty.
func Prefix() (string, error) {
	p := os.Getenv(PrefixEnv)
	if p == "" {
		return DefaultPrefix, nil
	}
	if !validPrefix.MatchString(p) {
		return "", fmt.Errorf("$%s %q is not a prefix of lowercase SQL names: use a lowercase letter, then up to 23 lowercase letters, digits or underscores", PrefixEnv, p)
	}
	return p, nil
}

// CreateDatabase creates an empty database named the prefix, then kind,
// then a random suffix (skipjacktest_example_3f2a...), on the server tests
// use, and returns its URL and a function that drops it (with FORCE,
// closing leftover connections). For programs that are not tests, such as
// the example; tests use NewDatabase, which drops it at cleanup.
func CreateDatabase(ctx context.Context, kind string) (dbURL string, drop func(context.Context) error, err error) {
	base, err := ServerURL()
	if err != nil {
		return "", nil, err
	}
	prefix, err := Prefix()
	if err != nil {
		return "", nil, err
	}
	name := prefix + kind + randomSuffix()
	quoted := pgx.Identifier{name}.Sanitize()
	if err := adminExec(ctx, base, "CREATE DATABASE "+quoted+" TEMPLATE template0"); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+quoted+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	dbURL, err = withDatabase(base, name)
	if err != nil {
		_ = drop(context.WithoutCancel(ctx))
		return "", nil, err
	}
	return dbURL, drop, nil
}
