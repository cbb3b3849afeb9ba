package main

import (
	"context"
	"fmt"
	"time"
)

// cmdTimeout implements "paddock timeout ID SECONDS".
func (c *cli) cmdTimeout(ctx context.Context, args []string) error {
	fs := c.flagSet("timeout")
	asJSON := fs.Bool("json", false, "print the updated sandbox as JSON")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("timeout", "want a sandbox ID and SECONDS, got %d arguments", len(pos))
	}
	secs, err := parseSeconds(pos[1])
	if err != nil || secs <= 0 {
		return usagef("timeout", "invalid SECONDS %q: want a positive number of seconds or a duration like 10m", pos[1])
	}
	sb := c.client().Sandbox(pos[0])
	if err := sb.SetTimeout(ctx, time.Duration(secs*float64(time.Second))); err != nil {
		return fmt.Errorf("set timeout of %s: %w", pos[0], err)
	}
	if *asJSON {
		return writeJSON(c.stdout, sb.Sandbox)
	}
	_, err = fmt.Fprintf(c.stdout, "%s expires %s\n", sb.ID, timeAndRel(sb.ExpiresAt, c.now()))
	return err
}
