package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// queueStats is one line of the temporary program's stats result: the
// queue's name and the runtime's skipjack.Stats.
type queueStats struct {
	Queue         string        `json:"queue"`
	Pending       int64         `json:"pending"`
	Scheduled     int64         `json:"scheduled"`
	Running       int64         `json:"running"`
	Completed     int64         `json:"completed"`
	Failed        int64         `json:"failed"`
	OldestPending time.Duration `json:"oldest_pending"`
}

// stats prints the counts of every live queue, as a table or as JSON.
func stats(o options, e env) error {
	result, _, err := runInModule(programRequest{Command: "stats"}, o.file, o.dbURL, e)
	if err != nil {
		return err
	}
	if o.asJSON {
		return printJSON(e, result)
	}
	var rows []queueStats
	if err := json.Unmarshal(result, &rows); err != nil {
		return fmt.Errorf("read stats: %w", err)
	}
	return printStats(e, rows)
}

// printStats prints rows as a table: queue names left-aligned, counts
// right-aligned under their headers.
func printStats(e env, rows []queueStats) error {
	width := len("QUEUE")
	for _, r := range rows {
		width = max(width, len(r.Queue))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%-*s  %9s  %9s  %9s  %9s  %9s  %14s\n", width, "QUEUE", "PENDING", "SCHEDULED", "RUNNING", "COMPLETED", "FAILED", "OLDEST PENDING")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %9d  %9d  %9d  %9d  %9d  %14v\n", width, r.Queue, r.Pending, r.Scheduled, r.Running, r.Completed, r.Failed, r.OldestPending.Round(time.Millisecond))
	}
	_, err := e.stdout.Write(b.Bytes())
	return err
}
