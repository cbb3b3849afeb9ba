package main

import (
	"context"
	"fmt"

	"github.com/paddock-sandbox/paddock/api"
)

// cmdFiles implements "paddock files ls ID [PATH]".
func (c *cli) cmdFiles(ctx context.Context, args []string) error {
	fs := c.flagSet("files")
	depth := fs.Int("depth", 0, "list `N` levels deep (default: the daemon's, 1)")
	asJSON := fs.Bool("json", false, "print the entries as a JSON array")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("files", "missing subcommand: want 'files ls ID [PATH]'")
	}
	if pos[0] != "ls" && pos[0] != "list" {
		return usagef("files", "unknown subcommand %q: want 'files ls ID [PATH]'", pos[0])
	}
	pos = pos[1:]
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("files", "want a sandbox ID and an optional PATH, got %d arguments", len(pos))
	}
	if *depth < 0 {
		return usagef("files", "--depth cannot be negative")
	}
	path := "/workspace"
	if len(pos) == 2 {
		path = pos[1]
	}
	entries, err := c.client().Sandbox(pos[0]).Files().List(ctx, path, *depth)
	if err != nil {
		return fmt.Errorf("list %s in %s: %w", path, pos[0], err)
	}
	if entries == nil {
		entries = []api.FileEntry{}
	}
	if *asJSON {
		return writeJSON(c.stdout, entries)
	}
	return writeFileTable(c.stdout, entries, c.now())
}
