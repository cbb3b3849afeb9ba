package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/paddock-sandbox/paddock/client"
)

// command is one subcommand of paddock.
type command struct {
	name    string
	aliases []string
	// args is the synopsis after "paddock NAME".
	args    string
	summary string
	// detail is the longer help text, with examples.
	detail string
	run    func(c *cli, ctx context.Context, args []string) error
}

// commands returns every subcommand, in the order of the help text.
func commands() []*command {
	return []*command{
		{
			name: "run", args: "[flags] [--] CMD [ARG...]",
			summary: "Run a command in a new sandbox, then delete it",
			detail: `Creates a sandbox, runs CMD in it with its output streamed (stdout to
stdout, stderr to stderr), deletes the sandbox and exits with the command's
exit status: 128+N when it was killed by signal N, 124 when it timed out.
The sandbox is deleted on Ctrl-C and SIGTERM too.

CMD and its arguments are passed as given, without a shell; everything
from the first argument that is not a flag belongs to the command. Use a
shell for pipes and variables:

  paddock run -- python3 -c 'print(6*7)'
  paddock run --template python --memory 1024 -- bash -c 'pip list | wc -l'
  paddock run --shell 'echo $HOME && ls /'`,
			run: (*cli).cmdRun,
		},
		{
			name: "create", args: "[flags]",
			summary: "Create a sandbox and print its id",
			detail: `Prints the id of the new sandbox, or the whole sandbox with --json.

  id=$(paddock create --template python --timeout 10m --meta owner=ci)`,
			run: (*cli).cmdCreate,
		},
		{
			name: "ls", aliases: []string{"list"}, args: "[flags]",
			summary: "List sandboxes",
			detail: `Lists sandboxes that still exist (creating, running, paused, stopped);
--all adds terminated ones. Every page is fetched.`,
			run: (*cli).cmdLs,
		},
		{
			name: "get", aliases: []string{"info"}, args: "[--json] ID",
			summary: "Show a sandbox",
			run:     (*cli).cmdGet,
		},
		{
			name: "kill", aliases: []string{"rm"}, args: "ID...",
			summary: "Delete sandboxes",
			detail:  `Deletes each sandbox and everything running in it, printing its id.`,
			run:     (*cli).cmdKill,
		},
		{
			name: "pause", args: "[--keep-for D] [--then-stop-after D] ID...",
			summary: "Freeze every process of sandboxes",
			detail: `Memory, processes and files are kept and CPU billing stops. A paused
sandbox is terminated after --keep-for (default: the daemon's pause
retention, 24 h) unless resumed. --then-stop-after stops it (files kept,
processes ended) that long after the pause, so its files outlive a host
reboot.

  paddock pause --keep-for 168h --then-stop-after 2h sb_123`,
			run: func(c *cli, ctx context.Context, args []string) error { return c.cmdPause(ctx, args, false) },
		},
		{
			name: "resume", args: "ID...",
			summary: "Continue paused (or start stopped) sandboxes",
			detail:  `Each resumed sandbox gets a new lease of the length it was created with.`,
			run:     func(c *cli, ctx context.Context, args []string) error { return c.cmdPause(ctx, args, true) },
		},
		{
			name: "stop", args: "[--keep-for D] ID...",
			summary: "Stop sandboxes, keeping their files",
			detail: `Ends every process and keeps the files for --keep-for (default: the
daemon's stop retention, 7 days); only storage is billed meanwhile.
"paddock start ID" boots it again. (kill deletes a sandbox.)`,
			run: (*cli).cmdStop,
		},
		{
			name: "metrics", args: "[--json] ID",
			summary: "Show a sandbox's resource use and cost",
			run:     (*cli).cmdMetrics,
		},
		{
			name: "usage", args: "[--json] [--since 24h]",
			summary: "Show this key's resource use and cost",
			run:     (*cli).cmdUsage,
		},
		{
			name: "timeout", args: "ID SECONDS",
			summary: "Set the remaining lifetime of a sandbox",
			detail: `The sandbox expires SECONDS from now (a number, or a duration like 10m).

  paddock timeout sb_123 3600`,
			run: (*cli).cmdTimeout,
		},
		{
			name: "exec", args: "[flags] ID [--] CMD [ARG...]",
			summary: "Run a command in a sandbox",
			detail: `Streams the output and exits with the command's exit status, as run does.
With --shell the command is one string run by bash -lc (or sh -c).

  paddock exec sb_123 -- ls -la /workspace
  paddock exec --shell sb_123 'cd /workspace && make test'
  tar c src | paddock exec --stdin sb_123 -- tar x -C /workspace

With -it (--tty) the command runs on a terminal connected to this one:
raw mode, the window size follows yours, and paddock exits with the
command's status. Closing the connection kills the command.

  paddock exec -it sb_123 -- python3`,
			run: (*cli).cmdExec,
		},
		codeCommand(),
		{
			name: "shell", args: "[--cwd DIR] [--env K=V] ID",
			summary: "Open an interactive shell in a sandbox",
			detail: `Runs a login shell (bash -l, or sh) on a terminal in the sandbox,
connected to this one; the same as paddock exec -it ID with no command.
Exits with the shell's status.

  paddock shell sb_123`,
			run: (*cli).cmdShell,
		},
		{
			name: "watch", args: "[-r] [--json] ID [PATH]",
			summary: "Print the changes under a directory of a sandbox",
			detail: `Prints one line per change (create, write, remove, rename) under PATH
(default /workspace) until interrupted; -r watches subdirectories too. An
overflow line says changes were lost (a slow reader, or too many
directories): list the directory again.

  paddock watch -r sb_123 src`,
			run: (*cli).cmdWatch,
		},
		{
			name: "cp", args: "SRC DST",
			summary: "Copy a file into or out of a sandbox",
			detail: `One of SRC and DST is ID:PATH, a path inside sandbox ID (relative paths
are relative to /workspace); the other is a local path, or - for stdin or
stdout. A DST ending in / (or a local directory) receives the file under its
own name. Only regular files are copied.

  paddock cp main.py sb_123:/workspace/
  paddock cp sb_123:out/report.csv .
  echo hi | paddock cp - sb_123:hello.txt`,
			run: (*cli).cmdCp,
		},
		{
			name: "files", args: "ls [flags] ID [PATH]",
			summary: "List files in a sandbox",
			detail:  `Lists the directory PATH (default /workspace), --depth levels deep.`,
			run:     (*cli).cmdFiles,
		},
		{
			name: "ps", args: "[--json] ID",
			summary: "List the background processes of a sandbox",
			run:     (*cli).cmdPs,
		},
		{
			name: "start", args: "[flags] ID [--] CMD [ARG...]  |  start ID",
			summary: "Start a background process, or a stopped sandbox",
			detail: `With a command: starts it and prints the process id at once; see it with
ps. Without one: boots the stopped sandbox ID again from its kept files
(fresh processes, same id, network policy and resources).

  paddock start sb_123 -- python3 -m http.server 8000
  paddock start sb_123`,
			run: (*cli).cmdStart,
		},
		{
			name: "template", aliases: []string{"templates"}, args: "build|ls|get|rm|snapshot [flags] [ARGS]",
			summary: "Build, list and delete templates",
			detail:  templateDetail,
			run:     (*cli).cmdTemplate,
		},
		{
			name: "mcp", args: "[flags]",
			summary: "Serve the sandbox tools to an MCP client over stdio",
			detail:  mcpDetail,
			run:     (*cli).cmdMCP,
		},
		{
			name: "version", args: "",
			summary: "Print the client and server versions",
			run:     (*cli).cmdVersion,
		},
		{
			name: "help", args: "[COMMAND]",
			summary: "Show help for paddock or a command",
			run:     (*cli).cmdHelp,
		},
	}
}

// findCommand returns the command called name (or an alias), or nil.
func findCommand(name string) *command {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd
		}
		for _, a := range cmd.aliases {
			if a == name {
				return cmd
			}
		}
	}
	return nil
}

// printMainHelp writes the overview of every command.
func (c *cli) printMainHelp(w io.Writer) {
	fmt.Fprintf(w, `paddock is the command-line client of Paddock, a self-hosted sandbox server.

Usage: paddock [--url URL] [--api-key KEY] COMMAND [ARGS...]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, cmd := range commands() {
		summary := cmd.summary
		if len(cmd.aliases) > 0 {
			summary += " (alias: " + strings.Join(cmd.aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", cmd.name, summary)
	}
	tw.Flush()
	fmt.Fprintf(w, `
Global flags, before or after the command:
  --url URL       paddockd address (env %s, default %s)
  --api-key KEY   API key (env %s)

Run 'paddock help COMMAND' for the flags of a command.
`, client.EnvURL, client.DefaultURL, client.EnvAPIKey)
}

// printCommandHelp writes the help of the command fs belongs to, with its
// flags.
func (c *cli) printCommandHelp(w io.Writer, fs *flag.FlagSet) {
	cmd := findCommand(fs.Name())
	if cmd == nil {
		c.printMainHelp(w)
		return
	}
	fmt.Fprintf(w, "Usage: paddock %s %s\n\n%s.\n", cmd.name, cmd.args, cmd.summary)
	if len(cmd.aliases) > 0 {
		fmt.Fprintf(w, "Alias: %s.\n", strings.Join(cmd.aliases, ", "))
	}
	if cmd.detail != "" {
		fmt.Fprintf(w, "\n%s\n", cmd.detail)
	}
	var flags strings.Builder
	tw := tabwriter.NewWriter(&flags, 0, 0, 3, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "url" || f.Name == "api-key" {
			return
		}
		value, usage := flag.UnquoteUsage(f)
		if value != "" {
			value = " " + value
		}
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "[]" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, value, usage)
	})
	tw.Flush()
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
	}
	fmt.Fprintln(w, "\nGlobal flags: --url URL, --api-key KEY (see 'paddock help').")
}

// cmdHelp implements "paddock help [COMMAND]".
func (c *cli) cmdHelp(ctx context.Context, args []string) error {
	fs := c.flagSet("help")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		c.printMainHelp(c.stdout)
		return nil
	}
	cmd := findCommand(pos[0])
	if cmd == nil || cmd.name == "help" {
		if cmd == nil {
			return usagef("", "unknown command %q", pos[0])
		}
		c.printMainHelp(c.stdout)
		return nil
	}
	// Every command prints its help, flags included, on -h.
	return cmd.run(c, ctx, []string{"-h"})
}
