package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/skipjack-dev/skipjack/cmd/skipjack/internal/tableadmin"
)

// queuesCommands are skipjack queues pause|resume: the state of a whole
// queue, which every worker of every process reads at its next claim.
var queuesCommands = []command{
	{
		name: "queues pause", synopsis: "QUEUE [-f skipjack.yaml] [--database-url URL]",
		summary: "stop every worker from claiming a queue's jobs (enqueueing still works)", database: true,
		args: oneQueue, run: queuesToggle(true),
	},
	{
		name: "queues resume", synopsis: "QUEUE [-f skipjack.yaml] [--database-url URL]",
		summary: "let workers claim a paused queue's jobs again", database: true,
		args: oneQueue, run: queuesToggle(false),
	},
}

// oneQueue parses the single QUEUE argument of queues pause and resume.
func oneQueue(o *options, args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("missing QUEUE")
	case len(args) > 1:
		return fmt.Errorf("unexpected arguments %q", args[1:])
	}
	o.queue = args[0]
	return nil
}

// queuesToggle returns the run function of queues pause (pause set) or
// queues resume.
func queuesToggle(pause bool) func(o options, e env) error {
	return func(o options, e env) error {
		return withQueue(o, func(ctx context.Context, q *tableadmin.Admin) error {
			was, err := q.Stats(ctx)
			if err != nil {
				return err
			}
			change, verb := q.Resume, "resumed"
			if pause {
				change, verb = q.Pause, "paused"
			}
			if err := change(ctx); err != nil {
				return err
			}
			switch {
			case was.Paused == pause:
				fmt.Fprintf(e.stdout, "%s: already %s\n", q.Name(), verb)
			case pause:
				fmt.Fprintf(e.stdout, "%s: paused; %d pending jobs wait, %d running jobs finish\n", q.Name(), was.Pending+was.Scheduled, was.Running)
			default:
				fmt.Fprintf(e.stdout, "%s: resumed; %d pending jobs can be claimed\n", q.Name(), was.Pending+was.Scheduled)
			}
			return nil
		})
	}
}
