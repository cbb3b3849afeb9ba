package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// cmdStop implements "paddock stop [--keep-for D] ID...".
func (c *cli) cmdStop(ctx context.Context, args []string) error {
	fs := c.flagSet("stop")
	var keepFor seconds
	fs.Var(&keepFor, "keep-for", "keep the files for `D` (seconds or a duration like 72h; default: the daemon's)")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("stop", "want at least one sandbox ID")
	}
	for _, id := range pos {
		sb := c.client().Sandbox(id)
		if err := sb.Stop(ctx, keepFor.duration()); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
		fmt.Fprintf(c.stdout, "%s %s (files kept until %s)\n", sb.ID, sb.State, timeAndRel(sb.ExpiresAt, c.now()))
	}
	return nil
}

// bootSandbox implements "paddock start ID": boot a stopped sandbox.
func (c *cli) bootSandbox(ctx context.Context, id string) error {
	sb := c.client().Sandbox(id)
	if err := sb.Boot(ctx); err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	_, err := fmt.Fprintf(c.stdout, "%s %s (expires %s)\n", sb.ID, sb.State, timeAndRel(sb.ExpiresAt, c.now()))
	return err
}

// duration is s as a time.Duration.
func (s seconds) duration() time.Duration { return time.Duration(float64(s) * float64(time.Second)) }

// idleFlags are the create flags of the idle policy.
type idleFlags struct {
	timeout   seconds
	onIdle    string
	resume    bool
	countProc bool
}

func (f *idleFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.timeout, "idle-timeout", "pause or stop the sandbox after `D` without API calls or port traffic (default: never)")
	fs.StringVar(&f.onIdle, "on-idle", "", "what idling out does: `pause` (default) or stop (files kept)")
	fs.BoolVar(&f.resume, "auto-resume", false, "resume or start the sandbox transparently on the next call")
	fs.BoolVar(&f.countProc, "idle-counts-processes", false, "running processes count as activity")
}

func (f *idleFlags) apply(req *api.CreateSandboxRequest) {
	req.IdleTimeoutSeconds, req.OnIdle = f.timeout.whole(), f.onIdle
	req.AutoResume, req.IdleCountsProcesses = f.resume, f.countProc
}
