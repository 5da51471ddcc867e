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
