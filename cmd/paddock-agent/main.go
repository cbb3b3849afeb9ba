// Command paddock-agent is Paddock's guest agent. It runs as PID 1 inside
// every sandbox and serves the daemon over HTTP on a unix socket; see
// package internal/agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/shim"
	"golang.org/x/sys/unix"
)

const usage = `Usage:
  paddock-agent serve [--listen-fd N | --listen PATH | --listen-tcp ADDR] [flags]
  paddock-agent shim [--status-fd N] [--control-fd N]
  paddock-agent install DEST

serve runs the agent's HTTP API on a unix socket: an inherited listening
socket (--listen-fd) or one it creates at PATH (--listen). As PID 1 it also
reaps every orphaned process of the sandbox. With --listen-tcp (the pod
backend: the agent reached over the pod network) every connection must
first send the per-sandbox token (64 characters): read from --token-file
(the pod backend mounts it from the sandbox's Kubernetes Secret) or else
from $PADDOCK_AGENT_TOKEN, which the agent removes from its environment
before any command runs. With --idle-exec (a unix socket only) an idle
agent hibernates: it execs that program (paddock-idle) in its own place,
which waits for the next connection and execs the agent again.

shim is internal: the agent starts every command under a shim (it keeps
one started ahead, waiting for its command on the control socket). The
shim is paddock-shim next to this binary when there is one, else this
binary with the shim subcommand.

install copies this binary to DEST (mode 0755), and paddock-shim from next
to this binary (if there) next to DEST (mode 0755): the pod backend's init
container puts the agent into a volume of the sandbox container.

Run "paddock-agent serve --help" for the serve flags.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "shim":
		return shim.Run(args[1:])
	case "install":
		return install(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "paddock-agent: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listenFD := fs.Int("listen-fd", -1, "serve on this inherited listening unix socket `fd`")
	listen := fs.String("listen", "", "create a unix socket at `path` and serve on it")
	listenTCP := fs.String("listen-tcp", "", "serve on TCP `addr` (host:port); connections must send the token (--token-file or $PADDOCK_AGENT_TOKEN) first")
	tokenFile := fs.String("token-file", "", "with --listen-tcp: read the connection token from this `file` (64 hex characters; default $PADDOCK_AGENT_TOKEN)")
	workdir := fs.String("workdir", agent.DefaultWorkdir, "default cwd and base of relative paths")
	nproc := fs.Int("nproc", 0, "RLIMIT_NPROC of commands, below the sandbox's pids limit (0 = inherit)")
	shim := fs.String("shim", "", "binary to run as the command shim (default: paddock-shim next to this binary, else this binary via /proc/self/exe)")
	maxFile := fs.Int64("max-file-bytes", agent.DefaultMaxFileBytes, "largest file upload or download")
	maxStdin := fs.Int64("max-stdin-bytes", agent.DefaultMaxStdinBytes, "largest stdin in one request")
	spareIdle := fs.Duration("spare-idle", 0, "retire the spare shim after this long without an exec (0 = keep it; the next exec after a retirement starts its own shim)")
	idleExec := fs.String("idle-exec", "", "hibernate: once the spare shim retired (--spare-idle) and nothing runs, no connection is open and nothing is kept for a client, exec this `program` (paddock-idle) in the agent's place; it holds the listening unix socket and execs the agent again at the next connection (\"\" = never)")
	stateFD := fs.Int("state-fd", -1, "internal: resume from the state a hibernated agent saved in this `fd`")
	debug := fs.Bool("debug", false, "log every request")
	if err := fs.Parse(args); err != nil {
		fs.SetOutput(os.Stderr)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Println("Usage: paddock-agent serve [--listen-fd N | --listen PATH] [flags]")
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(os.Stderr, "paddock-agent serve: %v\n", err)
		fs.PrintDefaults()
		return 2
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// A sandbox is small: one P means fewer threads and less memory. Set
	// here, not through $GOMAXPROCS, which commands would inherit.
	runtime.GOMAXPROCS(1)
	harden()
	ln, err := listener(*listenFD, *listen)
	if *listenTCP != "" {
		ln, err = tcpListener(*listenFD, *listen, *listenTCP, *tokenFile)
	}
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	ctx, stop := stopSignals(log)
	defer stop()
	shimPath := *shim
	if shimPath == "" {
		shimPath = findShim()
	}
	srv := agent.NewServer(agent.Config{
		Workdir:       *workdir,
		NProc:         *nproc,
		ShimPath:      shimPath,
		Reaper:        os.Getpid() == 1,
		MaxFileBytes:  *maxFile,
		MaxStdinBytes: *maxStdin,
		SpareIdle:     *spareIdle,
		IdleExec:      *idleExec,
		Args:          os.Args,
		StateFD:       *stateFD,
	}, log)
	log.Info("paddock-agent serving", "addr", ln.Addr().String(), "pid", os.Getpid(), "workdir", *workdir)
	if err := srv.Serve(ctx, ln); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

// harden protects the agent: the OOM killer should pick commands first
// (lowering the score needs privileges a sandbox may lack), nothing may
// ptrace it or read its memory, and a closed stdout or stderr must never
// kill it (with SIGPIPE notified, writes fail with EPIPE instead).
func harden() {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("-999"), 0)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	signal.Notify(make(chan os.Signal, 1), unix.SIGPIPE)
}

// stopSignals returns the context that ends serving. Outside a sandbox
// SIGTERM and SIGINT end it. As PID 1 of a sandbox nothing does: the
// sandbox's own root could send them (kill -TERM 1), and the kernel
// delivers them to a PID 1 that handles them, so SIGTERM, SIGINT, SIGHUP
// and SIGQUIT are caught and dropped. They are caught, not ignored, as an
// ignored signal would stay ignored in every command. The daemon stops a
// sandbox with SIGKILL from outside, which no handler can catch.
func stopSignals(log *slog.Logger) (context.Context, context.CancelFunc) {
	if os.Getpid() != 1 {
		return signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	}
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			select {
			case sig := <-ch:
				log.Warn("ignored a signal sent to PID 1", "signal", sig.String())
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// tcpListener listens on addr behind the token of tokenFile (when set) or
// $PADDOCK_AGENT_TOKEN, which it unsets so that no command inherits it.
func tcpListener(fd int, path, addr, tokenFile string) (net.Listener, error) {
	if fd >= 0 || path != "" {
		return nil, errors.New("set only one of --listen-fd, --listen and --listen-tcp")
	}
	token := os.Getenv("PADDOCK_AGENT_TOKEN")
	os.Unsetenv("PADDOCK_AGENT_TOKEN")
	if tokenFile != "" {
		b, err := readTokenFile(tokenFile)
		if err != nil {
			return nil, err
		}
		token = b
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	tl, err := agent.TokenListener(ln, token)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent token: %w", err)
	}
	return tl, nil
}

// readTokenFile reads a token file of at most a few bytes more than
// agent.TokenLen (a trailing newline is allowed).
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, agent.TokenLen+2))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// listener returns the inherited socket fd, or a new unix socket at path.
func listener(fd int, path string) (net.Listener, error) {
	switch {
	case fd >= 0 && path != "":
		return nil, errors.New("set only one of --listen-fd and --listen")
	case fd >= 0:
		f := os.NewFile(uintptr(fd), "listener")
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			return nil, fmt.Errorf("listen fd %d: %w", fd, err)
		}
		return ln, nil
	case path != "":
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path) // stale socket of an earlier run
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", path, err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen %s: %w", path, err)
		}
		return ln, nil
	}
	return nil, errors.New("one of --listen-fd and --listen is required")
}

// install copies the running binary to the one path in args, and
// paddock-shim from next to it (when there) next to that path.
func install(args []string) int {
	if len(args) != 1 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	err := installFile("/proc/self/exe", args[0], 0o755)
	if self, serr := os.Executable(); err == nil && serr == nil {
		src := filepath.Join(filepath.Dir(self), shimName)
		if _, serr := os.Stat(src); serr == nil {
			err = installFile(src, filepath.Join(filepath.Dir(args[0]), shimName), 0o755)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "paddock-agent install: %v\n", err)
		return 1
	}
	return 0
}

// installFile copies src to dst (with mode) through a temporary file.
func installFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_EXCL, 0o600)
	if err == nil {
		_, err = io.Copy(out, in)
		if err == nil {
			err = out.Chmod(mode) // not through the umask
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
