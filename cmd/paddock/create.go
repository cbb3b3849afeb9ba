package main

import (
	"context"
	"fmt"
)

// cmdCreate implements "paddock create".
func (c *cli) cmdCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("create")
	var sf sandboxFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print the sandbox as JSON")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("create", "unexpected argument %q", pos[0])
	}
	req, err := c.createRequest(&sf)
	if err != nil {
		return &usageError{cmd: "create", err: err}
	}
	sb, err := c.client().Create(ctx, req)
	if err != nil {
		return fmt.Errorf("create sandbox: %w", err)
	}
	if *asJSON {
		return writeJSON(c.stdout, sb.Sandbox)
	}
	_, err = fmt.Fprintln(c.stdout, sb.ID)
	return err
}
