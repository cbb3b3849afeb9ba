package main

import (
	"context"
	"fmt"
)

// cmdStart implements "paddock start".
func (c *cli) cmdStart(ctx context.Context, args []string) error {
	fs := c.flagSet("start")
	var ef execFlags
	ef.register(fs, execFlagOptions{
		timeoutName: "timeout",
		timeoutHelp: "kill the process after `SECONDS` (default: none beyond the sandbox's lifetime)",
		env:         true,
	})
	keepStdin := fs.Bool("keep-stdin", false, "leave the process's stdin open for later input")
	asJSON := fs.Bool("json", false, "print the process as JSON")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("start", "no sandbox ID given")
	}
	id, cmdline := pos[0], pos[1:]
	if len(cmdline) == 0 { // "paddock start ID": boot a stopped sandbox
		return c.bootSandbox(ctx, id)
	}
	if ef.shell && len(cmdline) > 1 {
		return usagef("start", "--shell takes the command as one argument; quote it")
	}
	req, err := c.execRequest("start", &ef, cmdline)
	if err != nil {
		return err
	}
	req.KeepStdinOpen = *keepStdin
	p, err := c.client().Sandbox(id).Start(ctx, req)
	if err != nil {
		return fmt.Errorf("start in %s: %w", id, err)
	}
	if *asJSON {
		return writeJSON(c.stdout, p.Process)
	}
	_, err = fmt.Fprintln(c.stdout, p.ID)
	return err
}
