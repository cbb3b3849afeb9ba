package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
)

// cmdPause implements "paddock pause ID..." and, with resume set,
// "paddock resume ID...".
func (c *cli) cmdPause(ctx context.Context, args []string, resume bool) error {
	name := "pause"
	if resume {
		name = "resume"
	}
	fs := c.flagSet(name)
	var keepFor, thenStop seconds
	if !resume {
		fs.Var(&keepFor, "keep-for", "keep the paused sandbox for `D` (seconds or a duration like 72h; default: the daemon's)")
		fs.Var(&thenStop, "then-stop-after", "stop it (files kept) `D` after the pause (default: never)")
	}
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef(name, "want at least one sandbox ID")
	}
	for _, id := range pos {
		sb := c.client().Sandbox(id)
		if resume {
			err = sb.Resume(ctx)
		} else {
			err = sb.PauseFor(ctx, keepFor.duration(), thenStop.duration())
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", name, id, err)
		}
		fmt.Fprintf(c.stdout, "%s %s (expires %s)\n", sb.ID, sb.State, timeAndRel(sb.ExpiresAt, c.now()))
	}
	return nil
}

// cmdMetrics implements "paddock metrics ID".
func (c *cli) cmdMetrics(ctx context.Context, args []string) error {
	fs := c.flagSet("metrics")
	asJSON := fs.Bool("json", false, "print the metrics as JSON")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("metrics", "want one sandbox ID")
	}
	m, err := c.client().Sandbox(pos[0]).Metrics(ctx)
	if err != nil {
		return fmt.Errorf("metrics of %s: %w", pos[0], err)
	}
	if *asJSON {
		return writeJSON(c.stdout, m)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "state\t%s\n", m.State)
	fmt.Fprintf(tw, "cpu\t%.2f s\n", m.CPUSeconds)
	fmt.Fprintf(tw, "running\t%.1f s\n", m.RunningSeconds)
	fmt.Fprintf(tw, "memory\t%.1f MiB (peak %.1f MiB, %.2f GiB·s)\n", mib(m.MemoryBytes), mib(m.MemoryPeakBytes), m.MemoryGiBSeconds)
	fmt.Fprintf(tw, "disk\t%.1f MiB\n", mib(m.DiskBytes))
	fmt.Fprintf(tw, "network\t%d B in, %d B out\n", m.NetworkRxBytes, m.NetworkTxBytes)
	fmt.Fprintf(tw, "processes\t%d\n", m.PIDs)
	fmt.Fprintf(tw, "cost\t%d micros\n", m.CostMicros)
	return tw.Flush()
}

// cmdUsage implements "paddock usage [--since D]".
func (c *cli) cmdUsage(ctx context.Context, args []string) error {
	fs := c.flagSet("usage")
	asJSON := fs.Bool("json", false, "print the usage as JSON")
	since := fs.Duration("since", 24*time.Hour, "how far back to count")
	if _, err := c.parse(fs, args, 0); err != nil {
		return err
	}
	now := c.now()
	u, err := c.client().Usage(ctx, now.Add(-*since), now)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if *asJSON {
		return writeJSON(c.stdout, u)
	}
	_, err = fmt.Fprintf(c.stdout, "%d sandboxes since %s: %.1f CPU s, %.1f running s, %.1f GiB·s memory, cost %d micros\n",
		u.Sandboxes, u.From.Local().Format(time.DateTime), u.CPUSeconds, u.RunningSeconds, u.MemoryGiBSeconds, u.CostMicros)
	return err
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
