package main

import (
	"context"
	"fmt"
)

// cmdGet implements "paddock get" (alias "info").
func (c *cli) cmdGet(ctx context.Context, args []string) error {
	fs := c.flagSet("get")
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("get", "want exactly one sandbox ID, got %d arguments", len(pos))
	}
	sb, err := c.client().Get(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	if *asJSON {
		return writeJSON(c.stdout, sb.Sandbox)
	}
	return writeSandbox(c.stdout, sb.Sandbox, c.now())
}
