package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/kernel"
)

// Defaults and limits of the agent.
const (
	DefaultWorkdir       = "/workspace"
	DefaultShimPath      = "/proc/self/exe"
	DefaultMaxFileBytes  = api.DefaultMaxFileBytes
	DefaultMaxStdinBytes = api.MaxStdinBytes
	DefaultMaxProcesses  = 1024

	maxJSONBytes = api.MaxJSONBodyBytes
	maxPathLen   = 4096
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	// Workdir is the default cwd of commands and the base of relative
	// paths (default /workspace). Serve creates it if it is missing.
	Workdir string
	// ShimPath is the binary run with the "shim" subcommand to start each
	// command (default /proc/self/exe, the agent itself). Its main must
	// call shim.Run. If another binary fails to start, the agent runs
	// itself as the shim from then on.
	ShimPath string
	// Reaper makes the server reap every child process, as PID 1 must.
	// Without it the server waits only for the shims it started.
	Reaper bool
	// MaxFileBytes bounds file uploads and downloads (default 100 MiB).
	MaxFileBytes int64
	// MaxStdinBytes bounds the stdin given in one request (default 16 MiB).
	MaxStdinBytes int64
	// MaxProcesses bounds the process table (default 1024).
	MaxProcesses int
	// MaxPTYs bounds the terminals open at once (default 16).
	MaxPTYs int
	// MaxWatches bounds the file watches open at once (default 8);
	// MaxWatchDirs the directories one watch covers (default 4096) and
	// WatchQueue the events one watch holds for a slow reader (default
	// 1024) before it drops them and reports an overflow.
	MaxWatches, MaxWatchDirs, WatchQueue int
	// NProc, if positive, is the RLIMIT_NPROC every command runs under,
	// below the sandbox's pids limit so that a fork bomb cannot take the
	// last process slots the agent itself needs.
	NProc int
	// SpareIdle, if positive, retires the spare shim once it has waited
	// that long without an exec (see shimPool); 0 keeps it. PUT /spare
	// changes it.
	SpareIdle time.Duration
	// IdleExec, if set, is the program a quiet agent execs in its own
	// place once its spare retired (hibernate.go), with Args (the
	// agent's argv) to start it again. It applies only to a unix
	// listener.
	IdleExec string
	Args     []string
	// StateFD, if positive, is a descriptor holding the state an agent
	// that hibernated saved; NewServer reads and closes it.
	StateFD int
}

func (c Config) withDefaults() Config {
	if c.Workdir == "" {
		c.Workdir = DefaultWorkdir
	}
	if c.ShimPath == "" {
		c.ShimPath = DefaultShimPath
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxStdinBytes <= 0 {
		c.MaxStdinBytes = DefaultMaxStdinBytes
	}
	if c.MaxProcesses <= 0 {
		c.MaxProcesses = DefaultMaxProcesses
	}
	c.MaxPTYs = cmp.Or(max(c.MaxPTYs, 0), DefaultMaxPTYs)
	c.MaxWatches = cmp.Or(max(c.MaxWatches, 0), DefaultMaxWatches)
	c.MaxWatchDirs = cmp.Or(max(c.MaxWatchDirs, 0), DefaultMaxWatchDirs)
	c.WatchQueue = cmp.Or(max(c.WatchQueue, 0), DefaultWatchQueue)
	return c
}

// Server is the agent's HTTP service.
type Server struct {
	cfg    Config
	log    *slog.Logger
	procs  *procTable
	reaper *reaper // nil unless Config.Reaper
	env    envStore
	shims  shimPool // the spare shim
	oom    oomCounter
	ptys   *ptyTable
	// watches holds a token per open file watch.
	watches chan struct{}
	code    *kernel.Manager // code contexts
	hib     hibernation
}

// NewServer returns a server for cfg. With cfg.Reaper it starts reaping
// children at once; Serve stops the reaper when it returns.
func NewServer(cfg Config, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg.withDefaults(), log: log}
	s.procs = newProcTable(s.cfg.MaxProcesses)
	s.ptys = newPTYTable(s.cfg.MaxPTYs)
	s.watches = make(chan struct{}, s.cfg.MaxWatches)
	s.code = s.newKernels()
	s.shims.idle = max(s.cfg.SpareIdle, 0)
	if s.cfg.StateFD > 0 {
		if st, err := readResumeState(s.cfg.StateFD); err != nil {
			log.Error("resume after hibernation", "err", err)
		} else {
			s.resume(st)
		}
	}
	if s.cfg.Reaper {
		s.reaper = startReaper(log)
	}
	return s
}

// Handler returns the agent's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /health", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return nil
	}))
	mux.Handle("GET /stats", s.handle(s.handleStats)) // stats.go
	mux.Handle("POST /exec", s.handle(s.handleExec))
	mux.Handle("POST "+ExecStdinPath, s.handle(s.handleExecStdin)) // exec_stdin.go
	mux.Handle("PUT /env", s.handle(s.handlePutEnv))
	mux.Handle("PUT /spare", s.handle(s.handlePutSpare)) // shimpool.go
	mux.Handle("POST /processes", s.handle(s.handleStartProcess))
	mux.Handle("GET /processes", s.handle(s.handleListProcesses))
	mux.Handle("GET /processes/{process}", s.handle(s.handleGetProcess))
	mux.Handle("POST /processes/{process}/wait", s.handle(s.handleWaitProcess))
	mux.Handle("GET /processes/{process}/output", s.handle(s.handleProcessOutput))
	mux.Handle("POST /processes/{process}/stdin", s.handle(s.handleProcessStdin))
	mux.Handle("POST /processes/{process}/kill", s.handle(s.handleKillProcess))
	mux.Handle("DELETE /processes/{process}", s.handle(s.handleForgetProcess))
	mux.Handle("PUT /files", s.handle(s.handlePutFile))
	mux.Handle("GET /files", s.handle(s.handleGetFile))
	mux.Handle("DELETE /files", s.handle(s.handleDeleteFile))
	mux.Handle("GET /files/list", s.handle(s.handleListFiles))
	mux.Handle("GET /files/stat", s.handle(s.handleStatFile))
	mux.Handle("POST /files/mkdir", s.handle(s.handleMkdir))
	mux.Handle("GET /ports", s.handle(s.handlePorts))
	mux.Handle("GET /pty", s.handle(s.handlePTY)) // upgrades to a WebSocket
	mux.Handle("GET /pty/list", s.handle(s.handleListPTYs))
	mux.Handle("POST /pty/{pty}/kill", s.handle(s.handleKillPTY))
	mux.Handle("GET /files/watch", s.handle(s.handleWatch))
	s.codeRoutes(mux)
	mux.HandleFunc("GET /connect", s.handleConnect) // hijacks: not wrapped
	mux.Handle("/", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return &apiError{Code: api.CodeNotFound, Msg: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)}
	}))
	return mux
}

// Serve serves the agent's routes on ln until ctx ends, then shuts down:
// open requests are cancelled (which kills their commands), every process
// still running is killed, and the reaper stops.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := os.MkdirAll(s.cfg.Workdir, 0o755); err != nil {
		s.log.Warn("create workdir", "path", s.cfg.Workdir, "err", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if ul, ok := ln.(*net.UnixListener); ok && s.cfg.IdleExec != "" {
		s.hib.gate = newGateListener(ul)
		ln = s.hib.gate
		defer s.hib.gate.stop()
	}
	if s.cfg.StateFD > 0 {
		// Back from hibernation: the call that woke the agent waits in the
		// backlog. An exec starts its own shim at once; a spare started
		// now would only compete with it for the sandbox's CPU.
		s.refillShimAfter(time.After(refillDelay))
	} else {
		s.refillShim()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		_ = srv.Close()
		<-errc
	}
	s.code.Close()
	s.killAll(5 * time.Second)
	s.closeShims(2 * time.Second)
	if s.reaper != nil {
		s.reaper.stop()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("agent: serve: %w", err)
	}
	return nil
}

// killAll kills every running process and waits up to d for them to end.
func (s *Server) killAll(d time.Duration) {
	deadline := time.After(d)
	for _, p := range s.procs.list() {
		_ = p.signal(sigKill, false)
	}
	for _, p := range s.procs.list() {
		select {
		case <-p.done:
		case <-deadline:
			s.log.Warn("processes still running at shutdown")
			return
		}
	}
}

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h: an error it returns is written as an api.ErrorResponse
// unless h already started its answer.
func (s *Server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &responseWriter{ResponseWriter: w}
		err := h(rw, r)
		if err != nil {
			if rw.status != 0 {
				s.log.Debug("error after answer started", "method", r.Method, "path", r.URL.Path, "err", err)
			} else if r.Context().Err() != nil {
				s.log.Debug("request ended by client", "method", r.Method, "path", r.URL.Path, "err", err)
			} else {
				ae := toAPIError(err)
				if ae.Code == api.CodeInternal {
					s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
				}
				writeJSON(rw, ae.status(), api.ErrorResponse{Error: api.ErrorBody{Code: ae.Code, Message: ae.Msg}})
			}
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "duration", time.Since(start))
	})
}

// responseWriter records whether an answer was started.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the Flusher underneath.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
