package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Exec defaults and bounds (the agent applies the same).
const (
	defaultExecTimeout = 60
	maxExecTimeout     = 86400
	defaultMaxOutput   = 64 << 10
	maxStdinBytes      = 16 << 20
	agentGrace         = 30 * time.Second
)

// agentStatuses are the statuses an agent answer may carry through; any
// other status from a (possibly compromised) agent becomes 502.
var agentStatuses = map[int]bool{200: true, 201: true, 204: true, 400: true, 404: true,
	409: true, 413: true, 429: true, 500: true, 507: true}

// forward sends a request to the sandbox's agent and copies its answer back,
// flushing as it goes and stopping after limit bytes.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, owner, method string, body io.Reader, length, limit int64, timeout time.Duration) error {
	id := r.PathValue("id")
	if _, err := s.mgr.Running(owner, id); err != nil {
		return err
	}
	ctx := r.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/sandboxes/"+id)
	u := "http://" + id + rest
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	req.ContentLength = length
	if a := r.Header.Get("Accept"); a != "" {
		req.Header.Set("Accept", a)
	}
	resp, err := s.mgr.AgentClient().Do(req)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return mbe
		case r.Context().Err() != nil:
			return nil // the client went away
		case errors.Is(err, sandbox.ErrUnavailable):
			return err
		}
		return fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	st := resp.StatusCode
	if !agentStatuses[st] {
		return fmt.Errorf("%w: agent answered %s", sandbox.ErrUnavailable, resp.Status)
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/json"), strings.HasPrefix(ct, api.ContentTypeNDJSON):
	default:
		ct = "application/octet-stream"
	}
	if st != http.StatusNoContent {
		w.Header().Set("Content-Type", ct)
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= limit {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(st)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 {
			if n+int64(k) > limit {
				s.log.Warn("agent answer over limit, cut", "sandbox", id, "limit", limit)
				return nil
			}
			n += int64(k)
			if _, werr := w.Write(buf[:k]); werr != nil {
				return nil
			}
			rc.Flush()
		}
		if err != nil {
			return nil
		}
	}
}

// proxyPlain forwards a call whose body (if any) is small JSON.
func (s *Server) proxyPlain(w http.ResponseWriter, r *http.Request, owner string) error {
	var body io.Reader
	length := int64(0)
	if r.Method == http.MethodPost {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if err != nil {
			return err
		}
		body, length = bytes.NewReader(b), int64(len(b))
	}
	timeout := agentGrace
	if strings.HasSuffix(r.URL.Path, "/wait") {
		t, _ := strconv.ParseFloat(r.URL.Query().Get("timeout_seconds"), 64)
		if t < 0 || t > 3600 {
			return fmt.Errorf("%w: timeout_seconds must be 0-3600", sandbox.ErrInvalid)
		}
		timeout += time.Duration(max(t, 30) * float64(time.Second))
	}
	if strings.HasSuffix(r.URL.Path, "/output") {
		timeout = 0 // lasts as long as the process; ends with the client
	}
	return s.forward(w, r, owner, r.Method, body, length, 6*maxOutputBytes+(1<<20), timeout)
}

// exec validates an exec request and forwards it.
func (s *Server) exec(w http.ResponseWriter, r *http.Request, owner string) error {
	req, err := s.execRequest(w, r, false)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(req)
	timeout := time.Duration(req.TimeoutSeconds*float64(time.Second)) + agentGrace
	limit := 6*req.MaxOutputBytes + (1 << 20)
	start := time.Now()
	err = s.forward(w, r, owner, http.MethodPost, bytes.NewReader(b), int64(len(b)), limit, timeout)
	if err == nil && s.cfg.Metrics != nil {
		s.cfg.Metrics.execTime.Observe(time.Since(start).Seconds())
	}
	return err
}

// startProcess validates a background process request and forwards it.
func (s *Server) startProcess(w http.ResponseWriter, r *http.Request, owner string) error {
	req, err := s.execRequest(w, r, true)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(req)
	return s.forward(w, r, owner, http.MethodPost, bytes.NewReader(b), int64(len(b)), 1<<20, agentGrace)
}

func (s *Server) processStdin(w http.ResponseWriter, r *http.Request, owner string) error {
	if r.ContentLength > maxStdinBytes {
		return fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, maxStdinBytes)
	}
	body := http.MaxBytesReader(w, r.Body, maxStdinBytes)
	return s.forward(w, r, owner, http.MethodPost, body, r.ContentLength, 1<<20, 5*time.Minute)
}

func (s *Server) putFile(w http.ResponseWriter, r *http.Request, owner string) error {
	if r.ContentLength > s.cfg.MaxFileBytes {
		return fmt.Errorf("%w: file larger than %d bytes (--max-file-bytes)", sandbox.ErrTooLarge, s.cfg.MaxFileBytes)
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes)
	return s.forward(w, r, owner, http.MethodPut, body, r.ContentLength, 1<<20, 30*time.Minute)
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, owner string) error {
	return s.forward(w, r, owner, http.MethodGet, nil, 0, s.cfg.MaxFileBytes+(1<<20), 30*time.Minute)
}

// execRequest decodes and validates an exec body and applies defaults.
func (s *Server) execRequest(w http.ResponseWriter, r *http.Request, background bool) (*api.ExecRequest, error) {
	if r.ContentLength > maxExecBody {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", sandbox.ErrTooLarge, maxExecBody)
	}
	// Large bodies are decoded in memory: bound how many at once.
	if r.ContentLength < 0 || r.ContentLength > maxJSONBody {
		select {
		case s.bigBodies <- struct{}{}:
			defer func() { <-s.bigBodies }()
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	var req api.ExecRequest
	if err := decode(w, r, maxExecBody, &req); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{sandbox.ErrInvalid}, a...)...)
	}
	switch {
	case len(req.Argv) == 0 && req.Command == "":
		return nil, bad("set argv or command")
	case len(req.Argv) > 0 && req.Command != "":
		return nil, bad("set argv or command, not both")
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return nil, bad("argv[0] is empty")
	case len(req.Argv) > 4096:
		return nil, bad("at most 4096 arguments")
	case req.Stdin != "" && req.StdinBase64 != "":
		return nil, bad("set stdin or stdin_base64, not both")
	}
	for _, a := range append([]string{req.Command, req.Cwd}, req.Argv...) {
		if strings.ContainsRune(a, 0) {
			return nil, bad("arguments, command and cwd must not contain NUL bytes")
		}
	}
	if len(req.Env) > 1024 {
		return nil, bad("at most 1024 env vars")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) || !utf8.ValidString(k) {
			return nil, bad("bad env var %q", k)
		}
	}
	stdin := len(req.Stdin)
	if req.StdinBase64 != "" {
		d, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return nil, bad("stdin_base64: %v", err)
		}
		stdin = len(d)
	}
	if stdin > maxStdinBytes {
		return nil, fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, maxStdinBytes)
	}
	switch {
	case req.TimeoutSeconds < 0 || req.TimeoutSeconds > maxExecTimeout:
		return nil, bad("timeout_seconds must be between 0 and %d", maxExecTimeout)
	case req.TimeoutSeconds == 0 && !background:
		req.TimeoutSeconds = defaultExecTimeout
	}
	switch {
	case req.MaxOutputBytes < 0 || req.MaxOutputBytes > maxOutputBytes:
		return nil, bad("max_output_bytes must be between 0 and %d", maxOutputBytes)
	case req.MaxOutputBytes == 0:
		req.MaxOutputBytes = defaultMaxOutput
	}
	return &req, nil
}
