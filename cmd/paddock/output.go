package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// shortDuration formats d (not negative) coarsely: "45s", "4m", "3h",
// "2d".
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// relTime formats t relative to now: "in 4m", "3h ago", "now", or "-" for
// the zero time.
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + shortDuration(d)
	default:
		return shortDuration(-d) + " ago"
	}
}

// ended reports whether a sandbox state is final (a stopped sandbox
// keeps its files and can start again).
func ended(state string) bool {
	return state == api.StateTerminated
}

// expires describes when a sandbox expires: "in 4m", "expired" or "-" for
// a sandbox that has ended.
func expires(sb api.Sandbox, now time.Time) string {
	switch {
	case ended(sb.State) || sb.ExpiresAt.IsZero():
		return "-"
	case !sb.ExpiresAt.After(now):
		return "expired"
	}
	return relTime(sb.ExpiresAt, now)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeSandboxTable writes sandboxes as a table with the columns ID,
// TEMPLATE, STATE, CREATED, EXPIRES and METADATA.
func writeSandboxTable(w io.Writer, sandboxes []api.Sandbox, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTEMPLATE\tSTATE\tCREATED\tEXPIRES\tMETADATA")
	for _, sb := range sandboxes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, orDash(sb.Template), orDash(sb.State),
			relTime(sb.CreatedAt, now), expires(sb, now), orDash(formatKV(sb.Metadata, ",")))
	}
	return tw.Flush()
}

// formatResources describes a sandbox's limits, for example
// "1.5 vCPU, 512 MiB memory, 2048 MiB disk, 256 pids".
func formatResources(r api.Resources) string {
	var parts []string
	if r.VCPUs > 0 {
		parts = append(parts, strconv.FormatFloat(r.VCPUs, 'f', -1, 64)+" vCPU")
	}
	if r.MemoryMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB memory", r.MemoryMiB))
	}
	if r.DiskMiB > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB disk", r.DiskMiB))
	}
	if r.PIDs > 0 {
		parts = append(parts, fmt.Sprintf("%d pids", r.PIDs))
	}
	return orDash(strings.Join(parts, ", "))
}

// timeAndRel formats t as RFC 3339 followed by the relative time.
func timeAndRel(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", t.Local().Format(time.RFC3339), relTime(t, now))
}

// writeSandbox writes one sandbox as "Field: value" lines.
func writeSandbox(w io.Writer, sb api.Sandbox, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	line("ID", sb.ID)
	line("Template", orDash(sb.Template))
	line("State", orDash(sb.State))
	if sb.Reason != "" {
		line("Reason", sb.Reason)
	}
	if sb.Runtime != "" {
		line("Runtime", sb.Runtime)
	}
	line("Resources", formatResources(sb.Resources))
	line("Created", timeAndRel(sb.CreatedAt, now))
	if sb.EndedAt != nil {
		line("Ended", timeAndRel(*sb.EndedAt, now))
	} else if sb.State == api.StatePaused || sb.State == api.StateStopped {
		line("Kept until", timeAndRel(sb.ExpiresAt, now))
	} else {
		line("Expires", timeAndRel(sb.ExpiresAt, now))
	}
	if sb.IdleTimeoutSeconds > 0 {
		line("Idle", fmt.Sprintf("%s after %ds (auto-resume %v)", sb.OnIdle, sb.IdleTimeoutSeconds, sb.AutoResume))
	}
	line("Metadata", orDash(formatKV(sb.Metadata, ", ")))
	for i, e := range sb.History {
		k := ""
		if i == 0 {
			k = "History:"
		}
		fmt.Fprintf(tw, "%s\t%s %s (%s)\n", k, e.At.Local().Format(time.RFC3339), e.State, e.Reason)
	}
	return tw.Flush()
}

// quoteArgs joins argv for display, quoting the arguments that need it.
func quoteArgs(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]{}!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// resultSummary describes how a command ended: "0", "1", "SIGKILL",
// "timeout", "oom".
func resultSummary(r *api.ExecResult) string {
	switch {
	case r == nil:
		return "-"
	case r.TimedOut:
		return "timeout"
	case r.OOMKilled:
		return "oom"
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	case r.Signal != nil:
		return *r.Signal
	}
	return "?"
}

// writeProcessTable writes background processes as a table.
func writeProcessTable(w io.Writer, procs []api.Process, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPID\tSTATE\tSTARTED\tEXIT\tCOMMAND")
	for _, p := range procs {
		cmd := p.Command
		if cmd == "" {
			cmd = quoteArgs(p.Argv)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.ID, p.PID, orDash(p.State),
			relTime(p.StartedAt, now), resultSummary(p.Result), cmd)
	}
	return tw.Flush()
}

// writeFileTable writes a file listing as a table; directories get a
// trailing "/" and symlinks their target.
func writeFileTable(w io.Writer, entries []api.FileEntry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODE\tSIZE\tMODIFIED\tPATH")
	for _, e := range entries {
		name := e.Path
		switch e.Type {
		case api.FileTypeDir:
			name += "/"
		case api.FileTypeSymlink:
			name += " -> " + e.LinkTarget
		}
		size := strconv.FormatInt(e.Size, 10)
		if e.Type == api.FileTypeDir {
			size = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", typeChar(e.Type)+orDash(e.Mode), size, relTime(e.ModifiedAt, now), name)
	}
	return tw.Flush()
}

// typeChar is the ls-style letter of a file type.
func typeChar(t string) string {
	switch t {
	case api.FileTypeDir:
		return "d"
	case api.FileTypeSymlink:
		return "l"
	case api.FileTypeFile:
		return "-"
	}
	return "?"
}
