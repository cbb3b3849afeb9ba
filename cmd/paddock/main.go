// Command paddock is the command-line client of Paddock, a self-hosted
// sandbox server. It talks to paddockd over the REST API through the Go
// SDK (package client).
//
// Usage:
//
//	paddock [--url URL] [--api-key KEY] COMMAND [ARGS...]
//
// Run "paddock help" for the list of commands and "paddock help COMMAND"
// for the flags of one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddock-sandbox/paddock/client"
)

// cli holds the streams, the global flags and the state of one invocation.
type cli struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// getenv looks up the local environment (for --env K without a value).
	getenv func(string) (string, bool)
	now    func() time.Time

	url    string
	apiKey string

	// signal is the number of the first SIGINT/SIGTERM caught, 0 if none.
	signal atomic.Int32
}

// usageError is a mistake on the command line; it exits with status 2.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError of the command cmd.
func usagef(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, err: fmt.Errorf(format, args...)}
}

// exitError ends the program with a status and no message, for example the
// exit status of a command run in a sandbox.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	c := &cli{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.LookupEnv,
		now:    time.Now,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Writes to a closed stdout pipe then fail with EPIPE instead of killing
	// the process before it can delete its sandbox.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		if n, ok := s.(syscall.Signal); ok {
			c.signal.Store(int32(n))
		} else {
			c.signal.Store(int32(syscall.SIGINT))
		}
		cancel()
		<-sigs
		fmt.Fprintln(c.stderr, "paddock: interrupted twice, exiting without cleanup")
		os.Exit(128 + int(c.signal.Load()))
	}()

	os.Exit(c.main(ctx, os.Args[1:]))
}

// main runs the command line args (without the program name) and returns
// the exit status.
func (c *cli) main(ctx context.Context, args []string) int {
	fs := c.flagSet("paddock")
	rest, err := parseArgs(fs, args, 0)
	if errors.Is(err, flag.ErrHelp) {
		c.printMainHelp(c.stdout)
		return 0
	}
	if err == nil && len(rest) == 0 {
		c.printMainHelp(c.stderr)
		return 2
	}
	if err != nil {
		return c.fail(&usageError{err: err})
	}
	cmd := findCommand(rest[0])
	if cmd == nil {
		return c.fail(&usageError{err: fmt.Errorf("unknown command %q", rest[0])})
	}
	err = cmd.run(c, ctx, rest[1:])
	if sig := c.signal.Load(); sig != 0 {
		fmt.Fprintln(c.stderr, "paddock: interrupted")
		return 128 + int(sig)
	}
	return c.fail(err)
}

// fail prints err as one line on stderr and returns the exit status it
// calls for.
func (c *cli) fail(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	msg := oneLine(err.Error())
	var ue *usageError
	if errors.As(err, &ue) {
		help := "paddock help"
		if ue.cmd != "" {
			help += " " + ue.cmd
		}
		fmt.Fprintf(c.stderr, "paddock: %s (see '%s')\n", msg, help)
		return 2
	}
	fmt.Fprintf(c.stderr, "paddock: %s\n", msg)
	return 1
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// flagSet returns a FlagSet for the command name with the global flags.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, "url", c.url, "paddockd `URL` (env "+client.EnvURL+", default "+client.DefaultURL+")")
	fs.StringVar(&c.apiKey, "api-key", c.apiKey, "API `KEY` (env "+client.EnvAPIKey+")")
	return fs
}

// parse parses args for the command fs.Name(); see parseArgs for cmdAt.
// -h prints the command's help and returns flag.ErrHelp; other mistakes
// become usage errors.
func (c *cli) parse(fs *flag.FlagSet, args []string, cmdAt int) ([]string, error) {
	pos, err := parseArgs(fs, args, cmdAt)
	if errors.Is(err, flag.ErrHelp) {
		c.printCommandHelp(c.stdout, fs)
		return nil, err
	}
	if err != nil {
		return nil, &usageError{cmd: fs.Name(), err: err}
	}
	return pos, nil
}

// client returns an SDK client for the global flags.
func (c *cli) client() *client.Client {
	return &client.Client{BaseURL: c.url, APIKey: c.apiKey, UserAgent: "paddock-cli/" + cliVersion()}
}

// lookupEnv is the lookup for --env K without a value.
func (c *cli) lookupEnv(k string) (string, bool) {
	if c.getenv == nil {
		return "", false
	}
	return c.getenv(k)
}
