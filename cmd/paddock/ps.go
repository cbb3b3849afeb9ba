package main

import (
	"context"
	"fmt"

	"github.com/paddock-sandbox/paddock/api"
)

// cmdPs implements "paddock ps ID".
func (c *cli) cmdPs(ctx context.Context, args []string) error {
	fs := c.flagSet("ps")
	asJSON := fs.Bool("json", false, "print the processes as a JSON array")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("ps", "want exactly one sandbox ID, got %d arguments", len(pos))
	}
	procs, err := c.client().Sandbox(pos[0]).Processes(ctx)
	if err != nil {
		return fmt.Errorf("list processes of %s: %w", pos[0], err)
	}
	if procs == nil {
		procs = []api.Process{}
	}
	if *asJSON {
		return writeJSON(c.stdout, procs)
	}
	return writeProcessTable(c.stdout, procs, c.now())
}
