package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// cmdExec implements "paddock exec".
func (c *cli) cmdExec(ctx context.Context, args []string) error {
	fs := c.flagSet("exec")
	var ef execFlags
	ef.register(fs, execFlagOptions{
		timeoutName: "timeout",
		timeoutHelp: "kill the command after `SECONDS` (default: the daemon's, " + strconv.Itoa(api.DefaultExecTimeoutSeconds) + ")",
		env:         true,
		stdin:       true,
		maxOutput:   maxStreamOutput,
	})
	asJSON := fs.Bool("json", false, "wait for the command and print its result as JSON (exit status 0 whatever the command's)")
	tty := fs.Bool("tty", false, "run the command on a terminal connected to this one (raw mode, resized with the window)")
	fs.BoolVar(tty, "it", false, "short for --tty")
	fs.BoolVar(tty, "t", false, "short for --tty")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("exec", "no sandbox ID given")
	}
	id, cmdline := pos[0], pos[1:]
	if len(cmdline) == 0 {
		return usagef("exec", "no command given")
	}
	if ef.shell && len(cmdline) > 1 {
		return usagef("exec", "--shell takes the command as one argument; quote it")
	}
	if *asJSON && !flagWasSet(fs, "max-output") {
		ef.maxOutput = 0 // the daemon's default: the result is held in memory
	}
	req, err := c.execRequest("exec", &ef, cmdline)
	if err != nil {
		return err
	}
	if *tty {
		if ef.stdin || *asJSON || ef.timeout > 0 {
			return usagef("exec", "--tty takes no --stdin, --json or --timeout")
		}
		return c.attach(ctx, id, client.PTYOptions{Argv: req.Argv, Command: req.Command, Cwd: req.Cwd, Env: req.Env})
	}
	sb := c.client().Sandbox(id)
	if *asJSON {
		res, err := sb.Exec(ctx, req)
		if err != nil {
			return fmt.Errorf("exec in %s: %w", id, err)
		}
		return writeJSON(c.stdout, res)
	}
	res, err := c.streamExec(ctx, sb, req)
	if err != nil {
		err = fmt.Errorf("exec in %s: %w", id, err)
	}
	return c.finishExec(res, err)
}
