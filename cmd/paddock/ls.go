package main

import (
	"context"
	"fmt"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// cmdLs implements "paddock ls".
func (c *cli) cmdLs(ctx context.Context, args []string) error {
	fs := c.flagSet("ls")
	asJSON := fs.Bool("json", false, "print the sandboxes as a JSON array")
	all := fs.Bool("all", false, "include stopped and terminated sandboxes")
	state := fs.String("state", "", "only sandboxes in `STATE` (creating, running, paused, stopped, terminated)")
	var meta kvList
	fs.Var(&meta, "meta", "only sandboxes with metadata `K=V` (repeatable)")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("ls", "unexpected argument %q", pos[0])
	}
	m, err := meta.toMap(nil)
	if err != nil {
		return usagef("ls", "--meta %v", err)
	}
	opts := client.ListOptions{State: *state, Metadata: m}
	sandboxes, err := collectSandboxes(ctx, c.client(), opts, *all || *state != "")
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	if *asJSON {
		return writeJSON(c.stdout, sandboxes)
	}
	return writeSandboxTable(c.stdout, sandboxes, c.now())
}

// collectSandboxes fetches every page of the listing; unless all is set it
// drops the sandboxes that have ended.
func collectSandboxes(ctx context.Context, cl *client.Client, opts client.ListOptions, all bool) ([]api.Sandbox, error) {
	sandboxes := []api.Sandbox{}
	for sb, err := range cl.All(ctx, opts) {
		if err != nil {
			return nil, err
		}
		if all || !ended(sb.State) {
			sandboxes = append(sandboxes, sb)
		}
	}
	return sandboxes, nil
}
