package main

import (
	"fmt"
	"time"
)

// migrate applies the config's pending migrations through the module's own
// generated Migrate.
func migrate(o options, e env) error {
	start := time.Now()
	_, cfg, err := runInModule(programRequest{Command: "migrate"}, o.file, o.dbURL, e)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "skipjack migrate: %s is up to date (schema %s) in %v\n", cfg.Name, cfg.Schema, time.Since(start).Round(time.Millisecond))
	return nil
}
