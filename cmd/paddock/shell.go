package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/paddock-sandbox/paddock/client"
	"golang.org/x/term"
)

// cmdShell implements "paddock shell": a login shell on a terminal.
func (c *cli) cmdShell(ctx context.Context, args []string) error {
	fs := c.flagSet("shell")
	cwd := fs.String("cwd", "", "working directory (default /workspace)")
	var env kvList
	fs.Var(&env, "env", "set `KEY=VALUE` in the shell's environment (repeatable)")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("shell", "want exactly one sandbox ID")
	}
	m, err := env.toMap(c.lookupEnv)
	if err != nil {
		return usagef("shell", "--env %w", err)
	}
	return c.attach(ctx, pos[0], client.PTYOptions{Cwd: *cwd, Env: m})
}

// attach runs opts on a new terminal of sandbox id, connected to the
// CLI's own terminal (raw mode, resized with the window), and exits with
// the command's status.
func (c *cli) attach(ctx context.Context, id string, opts client.PTYOptions) error {
	in, inIsFile := c.stdin.(*os.File)
	out, outIsFile := c.stdout.(*os.File)
	if outIsFile && term.IsTerminal(int(out.Fd())) {
		if w, h, err := term.GetSize(int(out.Fd())); err == nil {
			opts.Cols, opts.Rows = w, h
		}
	}
	if opts.Env == nil {
		opts.Env = map[string]string{}
	}
	if _, ok := opts.Env["TERM"]; !ok {
		if t, ok := c.lookupEnv("TERM"); ok && t != "" {
			opts.Env["TERM"] = t
		}
	}
	t, err := c.client().Sandbox(id).OpenPTY(ctx, opts)
	if err != nil {
		return fmt.Errorf("terminal in %s: %w", id, err)
	}
	defer t.Close()
	if inIsFile && term.IsTerminal(int(in.Fd())) {
		state, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(int(in.Fd()), state)
	}
	if outIsFile {
		stop := watchResize(ctx, int(out.Fd()), t)
		defer stop()
	}
	go func() { _, _ = io.Copy(t, c.stdin) }()
	if _, err := io.Copy(c.stdout, t); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("terminal in %s: %w", id, err)
	}
	code := 1
	if m := t.Exit(); m != nil {
		switch {
		case m.ExitCode != nil:
			code = *m.ExitCode
		case m.Signal != nil && signalNumber(*m.Signal) > 0:
			code = 128 + signalNumber(*m.Signal)
		}
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}
