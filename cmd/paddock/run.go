package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// createTimeout bounds sandbox creation by run, which does not let a
// signal cancel it (so that it learns the id of the sandbox to delete).
const createTimeout = 5 * time.Minute

// sandboxFlags are the flags that shape an api.CreateSandboxRequest.
type sandboxFlags struct {
	template  string
	timeout   seconds
	vcpus     float64
	memory    int64
	disk      int64
	pids      int64
	env       kvList
	meta      kvList
	onTimeout string
	maxCost   int64
	idle      idleFlags
}

// register defines the sandbox flags in fs.
func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.template, "template", "", "`TEMPLATE` of the sandbox (default: the daemon's)")
	fs.Var(&f.timeout, "timeout", "lifetime of the sandbox in `SECONDS` or as a duration like 10m (default: the daemon's)")
	fs.Float64Var(&f.vcpus, "vcpus", 0, "CPU quota in `CORES`, fractions allowed")
	fs.Int64Var(&f.memory, "memory", 0, "memory limit in `MiB`")
	fs.Int64Var(&f.disk, "disk", 0, "size of the writable layer in `MiB`")
	fs.Int64Var(&f.pids, "pids", 0, "maximum number of processes and threads (`N`)")
	fs.Var(&f.env, "env", "set `K=V` in the sandbox's environment (repeatable; K alone copies the local value)")
	fs.Var(&f.meta, "meta", "attach metadata `K=V` (repeatable)")
	fs.StringVar(&f.onTimeout, "on-timeout", "", "what happens at the end of the lease: `kill` (default), pause, or stop (files kept)")
	fs.Int64Var(&f.maxCost, "max-cost", 0, "stop the sandbox once it has cost `MICROS` (0 = no limit)")
	f.idle.register(fs)
}

// createRequest builds the CreateSandboxRequest of the flags.
func (c *cli) createRequest(f *sandboxFlags) (*api.CreateSandboxRequest, error) {
	env, err := f.env.toMap(c.lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("--env %w", err)
	}
	meta, err := f.meta.toMap(nil)
	if err != nil {
		return nil, fmt.Errorf("--meta %w", err)
	}
	if f.vcpus < 0 || f.memory < 0 || f.disk < 0 || f.pids < 0 {
		return nil, fmt.Errorf("resource limits cannot be negative")
	}
	req := &api.CreateSandboxRequest{
		Template:       f.template,
		TimeoutSeconds: f.timeout.whole(),
		Env:            env,
		Metadata:       meta,
		OnTimeout:      f.onTimeout,
		MaxCostMicros:  f.maxCost,
	}
	f.idle.apply(req)
	if f.vcpus > 0 || f.memory > 0 || f.disk > 0 || f.pids > 0 {
		req.Resources = &api.Resources{VCPUs: f.vcpus, MemoryMiB: f.memory, DiskMiB: f.disk, PIDs: f.pids}
	}
	return req, nil
}

// cmdRun implements "paddock run".
func (c *cli) cmdRun(ctx context.Context, args []string) error {
	fs := c.flagSet("run")
	var sf sandboxFlags
	sf.register(fs)
	var ef execFlags
	ef.register(fs, execFlagOptions{
		timeoutName: "exec-timeout",
		timeoutHelp: "kill the command after `SECONDS` (default: the daemon's, " + strconv.Itoa(api.DefaultExecTimeoutSeconds) + ")",
		stdin:       true,
		maxOutput:   maxStreamOutput,
	})
	cmdline, err := c.parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(cmdline) == 0 {
		return usagef("run", "no command given")
	}
	if ef.shell && len(cmdline) > 1 {
		return usagef("run", "--shell takes the command as one argument; quote it")
	}
	createReq, err := c.createRequest(&sf)
	if err != nil {
		return &usageError{cmd: "run", err: err}
	}
	if !flagWasSet(fs, "timeout") && ef.timeout > 0 {
		// Let the sandbox outlive the command it was made for.
		createReq.TimeoutSeconds = ef.timeout.whole() + 60
	}
	execReq, err := c.execRequest("run", &ef, cmdline)
	if err != nil {
		return err
	}
	sb, err := c.createForRun(ctx, createReq)
	if err != nil {
		return err
	}
	defer func() {
		if err := sb.Close(); err != nil {
			fmt.Fprintf(c.stderr, "paddock: warning: %v\n", oneLine(err.Error()))
		}
	}()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res, err := c.streamExec(ctx, sb, execReq)
	err = c.finishExec(res, err)
	if err != nil && ctx.Err() == nil && !ef.shell && len(cmdline) == 1 && strings.ContainsAny(cmdline[0], " \t") {
		fmt.Fprintf(c.stderr, "paddock: note: %q was run as one program name; for a shell command use --shell or -- bash -c '...'\n", cmdline[0])
	}
	return err
}

// createForRun creates the sandbox of run. A signal does not interrupt the
// request: the sandbox might be created anyway, and run could not delete
// it without its id. The caller checks ctx afterwards.
func (c *cli) createForRun(ctx context.Context, req *api.CreateSandboxRequest) (*client.Sandbox, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	sb, err := c.client().Create(cctx, req)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	return sb, nil
}
