package skipjackimpl

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	skipjack "github.com/skipjack-dev/skipjack/runtime"
)

// Defaults of the queue settings skipjack.yaml leaves out. They live here,
// in one place: the generator's config loader applies them to the YAML
// (and writes them into the generated QueueSpec), and the engine applies
// them to the zero fields of a QueueSpec written by hand (tests, RunJob).
const (
	DefaultMaxAttempts = 25
	DefaultBackoffMin  = time.Second
	DefaultBackoffMax  = time.Hour
	DefaultTimeout     = time.Minute
	DefaultLease       = 30 * time.Second
)

// withDefaults fills the zero fields of a spec with the queue defaults.
func (s QueueSpec) withDefaults() QueueSpec {
	if s.MaxAttempts <= 0 {
		s.MaxAttempts = DefaultMaxAttempts
	}
	if s.BackoffMin <= 0 {
		s.BackoffMin = DefaultBackoffMin
	}
	if s.BackoffMax < s.BackoffMin {
		s.BackoffMax = max(s.BackoffMin, DefaultBackoffMax)
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.Lease <= 0 {
		s.Lease = DefaultLease
	}
	return s
}

// Defaults of WorkerConfig's zero fields.
const (
	defaultConcurrency     = 100
	defaultBatchSize       = 200
	defaultPollInterval    = time.Second
	defaultAckDelay        = 25 * time.Millisecond
	defaultShutdownTimeout = 20 * time.Second
)

// configWithDefaults returns c with every zero field set to its default.
func configWithDefaults(c skipjack.WorkerConfig) skipjack.WorkerConfig {
	if c.Concurrency <= 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.BatchSize <= 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.PollInterval <= 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.AckDelay <= 0 {
		c.AckDelay = defaultAckDelay
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = defaultShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.WorkerID == "" {
		c.WorkerID = defaultWorkerID()
	}
	return c
}

// defaultWorkerID returns hostname:pid:random.
func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex())
}

// randomHex returns 8 random hex digits, which tell apart processes (in a
// default WorkerID) and runs (in the id of a run's workers-table row).
func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
