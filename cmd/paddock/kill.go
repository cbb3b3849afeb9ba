package main

import (
	"context"
	"fmt"
)

// cmdKill implements "paddock kill" (alias "rm").
func (c *cli) cmdKill(ctx context.Context, args []string) error {
	fs := c.flagSet("kill")
	ids, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("kill", "no sandbox ID given")
	}
	cl := c.client()
	if len(ids) == 1 {
		if err := cl.Sandbox(ids[0]).Kill(ctx); err != nil {
			return fmt.Errorf("kill %s: %w", ids[0], err)
		}
		_, err := fmt.Fprintln(c.stdout, ids[0])
		return err
	}
	failed := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := cl.Sandbox(id).Kill(ctx); err != nil {
			fmt.Fprintf(c.stderr, "paddock: kill %s: %s\n", id, oneLine(err.Error()))
			failed++
			continue
		}
		fmt.Fprintln(c.stdout, id)
	}
	if failed > 0 {
		return &exitError{code: 1}
	}
	return nil
}
