package main

import (
	"context"
	"io"
	"strconv"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/tooluse"
	"github.com/paddock-sandbox/paddock/tooluse/mcp"
)

// mcpDetail is the longer help of "paddock mcp".
const mcpDetail = `Serves the sandbox tools run_python, run_command, write_file and read_file
to an MCP client (Claude Code, Claude Desktop, an agent SDK...) over stdin
and stdout. The session's sandbox is created on the first tool call and
deleted when the client disconnects; one that expires (--sandbox-timeout)
is replaced by a new one on the next call, whose result says so. Every
sandbox carries the metadata paddock.mcp_session=<session id>.

With --sandbox ID the tools run in an existing sandbox of your key
instead; it is checked when the client connects and is never deleted
(nor replaced: once it is gone, calls fail).

The daemon and key come from --url/--api-key or PADDOCK_URL and
PADDOCK_API_KEY. paddockd serves the same tools over streamable HTTP at
/v1/mcp. See docs/mcp.md.

  claude mcp add --transport stdio --env PADDOCK_API_KEY=pdk_... paddock -- paddock mcp --sandbox-timeout 1h
  paddock mcp --template python --timeout 120 --meta project=demo
  paddock mcp --sandbox sb_abc123`

// cmdMCP implements "paddock mcp".
func (c *cli) cmdMCP(ctx context.Context, args []string) error {
	fs := c.flagSet("mcp")
	template := fs.String("template", "", "`TEMPLATE` of the sandboxes (default: the daemon's)")
	var execTimeout, lease seconds
	fs.Var(&execTimeout, "timeout", "kill each tool call's command after `SECONDS` or a duration like 2m (default "+strconv.Itoa(api.DefaultExecTimeoutSeconds)+")")
	fs.Var(&lease, "sandbox-timeout", "lifetime (lease) of each sandbox in `SECONDS` or as a duration like 1h (default: the daemon's)")
	perCall := fs.Bool("per-call", false, "run every tool call in a fresh sandbox, deleted afterwards (no files kept between calls)")
	attach := fs.String("sandbox", "", "run every tool call in the existing sandbox `ID` (of your key) instead of creating one; it is never deleted")
	var meta kvList
	fs.Var(&meta, "meta", "attach metadata `K=V` to the sandboxes (repeatable)")
	pos, err := c.parse(fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("mcp", "unexpected argument %q", pos[0])
	}
	m, err := meta.toMap(nil)
	if err != nil {
		return usagef("mcp", "--meta %v", err)
	}
	if *attach != "" && (*perCall || *template != "" || lease != 0 || len(m) > 0) {
		return usagef("mcp", "--sandbox attaches to an existing sandbox; it excludes --per-call, --template, --sandbox-timeout and --meta")
	}
	srv := mcp.New(c.client(), mcp.Options{
		Tools: tooluse.Options{Timeout: time.Duration(float64(execTimeout) * float64(time.Second)), Tools: tooluse.AllToolNames()},
		Sandbox: &api.CreateSandboxRequest{
			Template:       *template,
			TimeoutSeconds: lease.whole(),
			Metadata:       m,
		},
		PerCall: *perCall,
		Attach:  *attach,
		Version: cliVersion(),
	})
	stdio := newMCPStdio(c.stdin, c.stdout) // answers every request read before stdin's end
	return srv.Run(ctx, &sdk.IOTransport{Reader: stdio.reader(), Writer: stdio.writer()})
}

// nopWriteCloser is an io.WriteCloser whose Close does nothing: the MCP
// transport must not close the process's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
