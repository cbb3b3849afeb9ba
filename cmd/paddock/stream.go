package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// maxStreamOutput is the output cap the CLI asks for when it streams: the
// largest the daemon accepts, since the output goes to a terminal or pipe
// rather than into memory.
const maxStreamOutput = 16 << 20

// execFlags are the flags that shape an api.ExecRequest.
type execFlags struct {
	timeout   seconds
	cwd       string
	env       kvList
	stdin     bool
	shell     bool
	maxOutput int64
}

// execFlagOptions choose which exec flags a command has.
type execFlagOptions struct {
	timeoutName string // "timeout" or "exec-timeout"
	timeoutHelp string
	env         bool // --env sets the command's environment
	stdin       bool // --stdin sends the CLI's stdin
	maxOutput   int64
}

// register defines the exec flags chosen by o in fs.
func (f *execFlags) register(fs *flag.FlagSet, o execFlagOptions) {
	fs.Var(&f.timeout, o.timeoutName, o.timeoutHelp)
	fs.StringVar(&f.cwd, "cwd", "", "working `DIR` of the command (default /workspace)")
	if o.env {
		fs.Var(&f.env, "env", "set `K=V` in the command's environment (repeatable; K alone copies the local value)")
	}
	if o.stdin {
		fs.BoolVar(&f.stdin, "stdin", false, "send this program's standard input to the command")
	}
	fs.BoolVar(&f.shell, "shell", false, "run the command as one string with bash -lc (or sh -c)")
	f.maxOutput = o.maxOutput
	fs.Int64Var(&f.maxOutput, "max-output", o.maxOutput, "cap on stdout and on stderr, in `BYTES`")
}

// execRequest builds the ExecRequest of cmdline for the flags of the
// command cmd, reading stdin when --stdin is set.
func (c *cli) execRequest(cmd string, f *execFlags, cmdline []string) (api.ExecRequest, error) {
	req := api.ExecRequest{
		Cwd:            f.cwd,
		TimeoutSeconds: float64(f.timeout),
		MaxOutputBytes: f.maxOutput,
	}
	if f.shell {
		req.Command = strings.Join(cmdline, " ")
	} else {
		req.Argv = cmdline
	}
	env, err := f.env.toMap(c.lookupEnv)
	if err != nil {
		return req, usagef(cmd, "--env %w", err)
	}
	req.Env = env
	if f.stdin {
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return req, fmt.Errorf("read stdin: %w", err)
		}
		req.Stdin, req.StdinBase64 = stdinFields(data)
	}
	return req, nil
}

// stdinFields returns data as the stdin field when it is valid UTF-8, and
// as stdin_base64 otherwise.
func stdinFields(data []byte) (text, b64 string) {
	if utf8.Valid(data) {
		return string(data), ""
	}
	return "", base64.StdEncoding.EncodeToString(data)
}

// streamExec runs req in sb, copying its output to the CLI's stdout and
// stderr as it comes, and returns the result of the exit event.
func (c *cli) streamExec(ctx context.Context, sb *client.Sandbox, req api.ExecRequest) (*api.ExecResult, error) {
	for ev, err := range sb.ExecStream(ctx, req) {
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case api.EventStdout:
			if _, err := c.stdout.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("write stdout: %w", err)
			}
		case api.EventStderr:
			_, _ = c.stderr.Write(ev.Data)
		case api.EventExit:
			return ev.ExecResult, nil
		}
	}
	return nil, errors.New("exec stream ended without an exit status")
}

// finishExec reports how a streamed command ended: messages on stderr and
// an exitError for a non-zero status. err is the error of streamExec.
func (c *cli) finishExec(res *api.ExecResult, err error) error {
	if errors.Is(err, syscall.EPIPE) {
		// Our stdout was closed (paddock run ... | head): exit as a program
		// killed by SIGPIPE would, quietly.
		return &exitError{code: 128 + 13}
	}
	if err != nil {
		return err
	}
	if res.StdoutTruncated {
		fmt.Fprintf(c.stderr, "paddock: stdout truncated: the command wrote %d bytes, more than --max-output\n", res.StdoutBytes)
	}
	if res.StderrTruncated {
		fmt.Fprintf(c.stderr, "paddock: stderr truncated: the command wrote %d bytes, more than --max-output\n", res.StderrBytes)
	}
	code, msg := exitStatus(res)
	if msg != "" {
		fmt.Fprintf(c.stderr, "paddock: %s\n", msg)
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// exitStatus maps a command's result to the CLI's exit status, as a shell
// would (128+N for signal N), with 124 for a timeout; msg explains the
// cases a status alone does not.
func exitStatus(res *api.ExecResult) (code int, msg string) {
	switch {
	case res == nil:
		return 1, "command ended without an exit status"
	case res.TimedOut:
		return 124, fmt.Sprintf("command timed out after %.1fs and was killed", float64(res.DurationMS)/1000)
	}
	if res.OOMKilled {
		msg = "command killed: out of memory"
	}
	switch {
	case res.ExitCode != nil:
		return *res.ExitCode, msg
	case res.Signal != nil && signalNumber(*res.Signal) > 0:
		return 128 + signalNumber(*res.Signal), msg
	case res.OOMKilled:
		return 128 + 9, msg
	case res.Signal != nil:
		return 1, "command killed by signal " + *res.Signal
	}
	return 1, "command ended without an exit status"
}

// signalNumber returns the Linux number of a signal name such as
// "SIGKILL", "KILL" or "9", or 0 when it is unknown.
func signalNumber(name string) int {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 128 {
		return n
	}
	name = strings.TrimPrefix(strings.ToUpper(name), "SIG")
	switch name {
	case "HUP":
		return 1
	case "INT":
		return 2
	case "QUIT":
		return 3
	case "ILL":
		return 4
	case "TRAP":
		return 5
	case "ABRT", "IOT":
		return 6
	case "BUS":
		return 7
	case "FPE":
		return 8
	case "KILL":
		return 9
	case "USR1":
		return 10
	case "SEGV":
		return 11
	case "USR2":
		return 12
	case "PIPE":
		return 13
	case "ALRM":
		return 14
	case "TERM":
		return 15
	case "STKFLT":
		return 16
	case "CHLD":
		return 17
	case "CONT":
		return 18
	case "STOP":
		return 19
	case "TSTP":
		return 20
	case "TTIN":
		return 21
	case "TTOU":
		return 22
	case "URG":
		return 23
	case "XCPU":
		return 24
	case "XFSZ":
		return 25
	case "VTALRM":
		return 26
	case "PROF":
		return 27
	case "WINCH":
		return 28
	case "IO", "POLL":
		return 29
	case "PWR":
		return 30
	case "SYS":
		return 31
	}
	return 0
}
