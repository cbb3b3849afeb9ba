package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/paddock-sandbox/paddock/api"
)

// cmdWatch implements "paddock watch": print a directory's changes.
func (c *cli) cmdWatch(ctx context.Context, args []string) error {
	fs := c.flagSet("watch")
	recursive := fs.Bool("recursive", false, "watch subdirectories too")
	fs.BoolVar(recursive, "r", false, "short for --recursive")
	asJSON := fs.Bool("json", false, "print each event as a JSON line")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("watch", "want ID [PATH]")
	}
	path := "/workspace"
	if len(pos) == 2 {
		path = pos[1]
	}
	w, err := c.client().Sandbox(pos[0]).Watch(ctx, path, *recursive)
	if err != nil {
		return fmt.Errorf("watch in %s: %w", pos[0], err)
	}
	defer w.Close()
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if *asJSON {
			if err := json.NewEncoder(c.stdout).Encode(ev); err != nil {
				return err
			}
			continue
		}
		switch ev.Type {
		case api.WatchRename:
			fmt.Fprintf(c.stdout, "rename\t%s -> %s\n", ev.OldPath, ev.Path)
		case api.WatchOverflow:
			fmt.Fprintf(c.stdout, "overflow\t%s\n", ev.Message)
		default:
			fmt.Fprintf(c.stdout, "%s\t%s\n", ev.Type, ev.Path)
		}
	}
}
