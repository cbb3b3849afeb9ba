package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
)

// The limits and defaults of an ExecRequest are those of package api
// (api.DefaultExecTimeoutSeconds, ...): the agent alone applies them.
const (
	defaultPath     = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	envPrefixHidden = "PADDOCK_"
	// releaseOutputBytes is the kept output of an exec from which the
	// agent returns its memory to the system as soon as it answered.
	releaseOutputBytes = 4 << 20
)

// execSpec is a validated ExecRequest, ready to start.
type execSpec struct {
	path      string   // resolved executable
	argv      []string // argv of the executable
	dir       string   // absolute cwd
	env       []string
	stdin     []byte
	keepStdin bool
	// streamStdin: the stdin arrives after the start (pumpStdin), which
	// closes it.
	streamStdin bool
	timeout     time.Duration // 0: none
	maxOutput   int64

	reqArgv []string // as requested, for api.Process
	command string
}

// execSpec validates req. background selects the process defaults (no
// timeout unless asked, stdin may stay open).
func (s *Server) execSpec(req *api.ExecRequest, background bool) (*execSpec, error) {
	spec := &execSpec{reqArgv: req.Argv, command: req.Command, keepStdin: background && req.KeepStdinOpen}
	switch {
	case len(req.Argv) > 0 && req.Command != "":
		return nil, badRequest("set either argv or command, not both")
	case len(req.Argv) == 0 && req.Command == "":
		return nil, badRequest("argv or command is required")
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return nil, badRequest("argv[0] is empty")
	case len(req.Argv) > api.MaxExecArgs:
		return nil, badRequest("at most %d arguments", api.MaxExecArgs)
	case len(req.Env) > api.MaxExecEnv:
		return nil, badRequest("at most %d env vars", api.MaxExecEnv)
	}
	if slices.ContainsFunc(req.Argv, hasNUL) || hasNUL(req.Command) {
		return nil, badRequest("argv and command must not contain NUL bytes")
	}

	switch t := req.TimeoutSeconds; {
	case math.IsNaN(t) || t < 0 || t > api.MaxExecTimeoutSeconds:
		return nil, badRequest("timeout_seconds must be between 0 and %d", api.MaxExecTimeoutSeconds)
	case t == 0 && !background:
		spec.timeout = api.DefaultExecTimeoutSeconds * time.Second
	case t > 0:
		spec.timeout = max(time.Duration(t*float64(time.Second)), time.Millisecond)
	}
	switch m := req.MaxOutputBytes; {
	case m < 0 || m > api.MaxOutputBytes:
		return nil, badRequest("max_output_bytes must be between 0 and %d", api.MaxOutputBytes)
	case m == 0:
		spec.maxOutput = api.DefaultMaxOutputBytes
	default:
		spec.maxOutput = m
	}

	switch {
	case req.Stdin != "" && req.StdinBase64 != "":
		return nil, badRequest("set either stdin or stdin_base64, not both")
	case req.StdinBase64 != "":
		b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return nil, badRequest("stdin_base64: %v", err)
		}
		spec.stdin = b
	default:
		spec.stdin = []byte(req.Stdin)
	}
	if int64(len(spec.stdin)) > s.cfg.MaxStdinBytes {
		return nil, tooLarge("stdin larger than %d bytes", s.cfg.MaxStdinBytes)
	}

	env, err := commandEnv(s.baseEnv(), req.Env)
	if err != nil {
		return nil, err
	}
	spec.env = env

	spec.dir = s.cfg.Workdir
	if req.Cwd != "" {
		if spec.dir, err = s.resolvePath(req.Cwd); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(spec.dir); err != nil || !fi.IsDir() {
		return nil, badRequest("cwd %s is not an existing directory", spec.dir)
	}

	if req.Command != "" {
		spec.path, spec.argv = "/bin/sh", []string{"/bin/sh", "-c", req.Command}
		if fi, err := os.Stat("/bin/bash"); err == nil && !fi.IsDir() {
			spec.path, spec.argv = "/bin/bash", []string{"/bin/bash", "-lc", req.Command}
		}
		return spec, nil
	}
	spec.argv = req.Argv
	spec.path, err = lookPath(req.Argv[0], envValue(env, "PATH"), spec.dir)
	return spec, err
}

func hasNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// commandEnv is base without PADDOCK_* variables, with extra set on top
// and PATH defaulted.
func commandEnv(base []string, extra map[string]string) ([]string, error) {
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || hasNUL(v) || !utf8.ValidString(k) {
			return nil, badRequest("invalid environment variable %q", k)
		}
	}
	env := make([]string, 0, len(base)+len(extra)+1)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := extra[k]; ok || strings.HasPrefix(k, envPrefixHidden) {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+extra[k])
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		env = append(env, "PATH="+defaultPath)
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath resolves file like execvp would with PATH pathEnv from cwd dir:
// names with a slash are taken as they are (relative to dir), others are
// searched in pathEnv.
func lookPath(file, pathEnv, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if !isExecutable(p) {
			return "", badRequest("executable file not found: %s", file)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, file); isExecutable(p) {
			return p, nil
		}
	}
	return "", badRequest("executable file not found: %s", file)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}

// execBodyLimit bounds an ExecRequest body: 1 MiB plus room for
// MaxStdinBytes of stdin in base64.
func (s *Server) execBodyLimit() int64 {
	return maxJSONBytes + (s.cfg.MaxStdinBytes+2)/3*4
}

// handleExec runs a command to its end: POST /exec.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, &req, s.execBodyLimit(), false); err != nil {
		return err
	}
	spec, err := s.execSpec(&req, false)
	if err != nil {
		return err
	}
	p, err := s.startProc(spec)
	if err != nil {
		return err
	}
	return s.serveExec(w, r, p, nil)
}

func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON)
}

// streamEvents answers with the NDJSON events of o, flushing each. end,
// when not nil, is called before the exit event; its error replaces that
// event with an error event.
func streamEvents(ctx context.Context, w http.ResponseWriter, o *outputLog, end func() error) error {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	return o.follow(ctx, func(ev api.Event) error {
		if ev.Type == api.EventExit && end != nil {
			if err := end(); err != nil {
				ae := toAPIError(err)
				ev = api.Event{Type: api.EventError, Time: ev.Time, Error: &api.ErrorBody{Code: ae.Code, Message: ae.Msg}}
			}
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
		return rc.Flush()
	})
}
