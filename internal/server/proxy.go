package server

// The exec and process routes: each decodes the request (transport bounds
// only), checks the sandbox is the caller's and running, and makes one
// typed call through the agent client. The agent validates what it runs
// and applies its defaults; its answers reach the client re-encoded from
// their types, never copied as bytes.

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// agentErr is what a handler returns for err from the agent client: nil
// when the API client went away (nothing is left to answer).
func agentErr(r *http.Request, err error) error {
	if r.Context().Err() != nil {
		return nil
	}
	return err
}

// running checks that the {id} of r is owner's running sandbox.
func (s *Server) running(r *http.Request, owner string) (string, error) {
	id := r.PathValue("id")
	_, err := s.mgr.Running(r.Context(), owner, id)
	return id, err
}

// exec runs a command to its end: one JSON result, or NDJSON events with
// Accept: application/x-ndjson.
func (s *Server) exec(w http.ResponseWriter, r *http.Request, owner string) error {
	req, stdin, err := s.execInput(w, r, owner)
	if err != nil {
		return err
	}
	if stdin != nil {
		defer stdin.drain()
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := s.untilPaused(r, id)
	defer cancel()
	if strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON) {
		var evs *agent.Events
		if stdin != nil {
			// Events go out while the stdin still arrives.
			_ = http.NewResponseController(w).EnableFullDuplex()
			evs, err = s.agent.ExecStreamStdin(ctx, id, req, stdin, stdin.size)
		} else {
			evs, err = s.agent.ExecStream(ctx, id, req)
		}
		if err != nil {
			return cmp.Or(stdinFailed(stdin), agentErr(r, err))
		}
		defer evs.Close()
		s.streamEvents(r, w, id, evs, stdin)
	} else {
		var res *api.ExecResult
		if stdin != nil {
			res, err = s.agent.ExecStdin(ctx, id, req, stdin, stdin.size)
		} else {
			res, err = s.agent.Exec(ctx, id, req)
		}
		if err := stdinFailed(stdin); err != nil {
			return err
		}
		if err != nil {
			if err := agentErr(r, err); err != nil {
				return cmp.Or(s.mgr.EndedDuring(r.Context(), id), err)
			}
			return nil
		}
		if stdin != nil {
			stdin.drain() // before the answer: see drain
		}
		writeJSON(w, http.StatusOK, res)
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.execTime.Observe(time.Since(start).Seconds())
	}
	return nil
}

// stdinFailed is the error that cut stdin short (nil stdin: none).
func stdinFailed(stdin *execStdin) error {
	if stdin == nil {
		return nil
	}
	return stdin.failed()
}

// streamEvents answers with evs as NDJSON, flushing each event, until the
// stream ends or the client goes away. A stream the agent cut short
// because the sandbox stopped running (its lease ended, it was deleted)
// ends with an error event that says so, not with a bare EOF.
func (s *Server) streamEvents(r *http.Request, w http.ResponseWriter, id string, evs *agent.Events, stdin *execStdin) {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		ev, err := evs.Next()
		if err != nil {
			if errors.Is(err, agent.ErrStreamTooLarge) {
				s.log.Warn("agent stream over its bound, cut", "sandbox", id)
			}
			if r.Context().Err() != nil {
				return
			}
			ended := stdinFailed(stdin)
			if ended == nil {
				ended = s.mgr.EndedDuring(r.Context(), id)
			}
			if ended != nil {
				code, _ := classify(ended)
				_ = enc.Encode(api.Event{Type: api.EventError, Error: &api.ErrorBody{Code: code, Message: ended.Error()}})
				_ = rc.Flush()
			}
			return
		}
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			return
		}
		if ev.Type == api.EventExit || ev.Type == api.EventError {
			return // the last event of a stream
		}
	}
}

// startProcess starts a background process.
func (s *Server) startProcess(w http.ResponseWriter, r *http.Request, owner string) error {
	req, err := s.execRequest(w, r, owner)
	if err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	p, err := s.agent.StartProcess(r.Context(), id, req)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusCreated, p)
	return nil
}

// execInput reads an exec body: the request and, for a large body, its
// stdin apart (nil: none, or in the request). With StdinLastHeader the
// stdin is read as the command runs; otherwise the body is decoded whole
// first (execRequest) and its stdin handed on as raw bytes.
func (s *Server) execInput(w http.ResponseWriter, r *http.Request, owner string) (*api.ExecRequest, *execStdin, error) {
	small := r.ContentLength >= 0 && r.ContentLength <= smallExecBody
	if r.ContentLength > api.MaxExecBodyBytes {
		return nil, nil, fmt.Errorf("%w: request body larger than %d bytes", sandbox.ErrTooLarge, api.MaxExecBodyBytes)
	}
	if !small && r.Header.Get(StdinLastHeader) == "true" {
		return streamedStdin(w, r)
	}
	req, err := s.execRequest(w, r, owner)
	if err != nil || small || (req.Stdin == "" && req.StdinBase64 == "") || (req.Stdin != "" && req.StdinBase64 != "") {
		return req, nil, err // the agent refuses both stdins
	}
	data := []byte(req.Stdin)
	if req.StdinBase64 != "" {
		if data, err = base64.StdEncoding.DecodeString(req.StdinBase64); err != nil {
			return nil, nil, fmt.Errorf("%w: stdin_base64: %v", sandbox.ErrInvalid, err)
		}
	}
	if len(data) > api.MaxStdinBytes {
		return nil, nil, fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, api.MaxStdinBytes)
	}
	req.Stdin, req.StdinBase64 = "", ""
	return req, newExecStdin(bytes.NewReader(data), int64(len(data))), nil
}

// execRequest decodes an exec or process body. Only its size is bounded
// here: the agent validates it and applies the defaults. A large body
// (or one of unknown length) goes through the exec body gate: owner's
// upload slots, then a decode slot once it has arrived.
func (s *Server) execRequest(w http.ResponseWriter, r *http.Request, owner string) (*api.ExecRequest, error) {
	if r.ContentLength > api.MaxExecBodyBytes {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", sandbox.ErrTooLarge, api.MaxExecBodyBytes)
	}
	var req api.ExecRequest
	if r.ContentLength >= 0 && r.ContentLength <= api.MaxJSONBodyBytes {
		if err := decode(w, r, api.MaxExecBodyBytes, &req); err != nil {
			return nil, err
		}
		return &req, nil
	}
	body, release, err := s.execBodies.read(w, r, owner, api.MaxExecBodyBytes)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := decodeFrom(bytes.NewReader(body), &req); err != nil {
		return nil, err
	}
	return &req, nil
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	out, err := s.agent.ListProcesses(r.Context(), id)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	p, err := s.agent.GetProcess(r.Context(), id, r.PathValue("process"))
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) waitProcess(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := discardBody(w, r); err != nil {
		return err
	}
	var timeout *float64
	if q := r.URL.Query().Get("timeout_seconds"); q != "" {
		t, err := strconv.ParseFloat(q, 64)
		if err != nil {
			return fmt.Errorf("%w: timeout_seconds must be a number between 0 and %d", sandbox.ErrInvalid, api.MaxWaitTimeoutSeconds)
		}
		timeout = &t
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	p, err := s.agent.WaitProcess(r.Context(), id, r.PathValue("process"), timeout)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// processOutput streams a process's output; it lasts as long as the
// process and ends with the client.
func (s *Server) processOutput(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	ctx, cancel := s.untilPaused(r, id)
	defer cancel()
	evs, err := s.agent.ProcessOutput(ctx, id, r.PathValue("process"))
	if err != nil {
		return agentErr(r, err)
	}
	defer evs.Close()
	s.streamEvents(r, w, id, evs, nil)
	return nil
}

func (s *Server) processStdin(w http.ResponseWriter, r *http.Request, owner string) error {
	if r.ContentLength > api.MaxStdinBytes {
		return fmt.Errorf("%w: stdin larger than %d bytes", sandbox.ErrTooLarge, api.MaxStdinBytes)
	}
	eof, err := boolQuery(r, "eof")
	if err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, api.MaxStdinBytes)
	if err := s.agent.WriteStdin(r.Context(), id, r.PathValue("process"), body, r.ContentLength, eof); err != nil {
		return agentErr(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.SignalRequest
	if err := decode(w, r, api.MaxJSONBodyBytes, &req); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	if err := s.agent.KillProcess(r.Context(), id, r.PathValue("process"), req.Signal); err != nil {
		return agentErr(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// discardBody reads and drops the body of a route that takes none, within
// the JSON body bound (a larger body is refused as too large).
func discardBody(w http.ResponseWriter, r *http.Request) error {
	_, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, api.MaxJSONBodyBytes))
	return err
}

// boolQuery parses an optional boolean query parameter.
func boolQuery(r *http.Request, name string) (bool, error) {
	q := r.URL.Query().Get(name)
	if q == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(q)
	if err != nil {
		return false, fmt.Errorf("%w: %s must be true or false", sandbox.ErrInvalid, name)
	}
	return b, nil
}
