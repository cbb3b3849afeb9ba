package server

// The code routes: cells and code contexts, one typed agent call each. The
// agent's kernels validate the request and apply the defaults.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// runCode runs a cell: one CodeExecution, or NDJSON CodeEvents with
// Accept: application/x-ndjson.
func (s *Server) runCode(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.CodeRequest
	if err := decode(w, r, api.MaxCodeBytes+api.MaxJSONBodyBytes, &req); err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	start := time.Now()
	if strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON) {
		evs, err := s.agent.RunCodeStream(r.Context(), id, &req)
		if err != nil {
			return agentErr(r, err)
		}
		defer evs.Close()
		s.streamCodeEvents(w, id, evs)
	} else {
		res, err := s.agent.RunCode(r.Context(), id, &req)
		if err != nil {
			return agentErr(r, err)
		}
		writeCodeJSON(w, http.StatusOK, res)
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.execTime.Observe(time.Since(start).Seconds())
	}
	return nil
}

// writeCodeJSON is writeJSON without HTML escaping (SVG and HTML results
// would grow by a third).
func writeCodeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// streamCodeEvents answers with evs as NDJSON, flushing each event.
func (s *Server) streamCodeEvents(w http.ResponseWriter, id string, evs *agent.CodeEvents) {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		ev, err := evs.Next()
		if err != nil {
			if errors.Is(err, agent.ErrStreamTooLarge) {
				s.log.Warn("agent code stream over its bound, cut", "sandbox", id)
			}
			return
		}
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			return
		}
	}
}

func (s *Server) createCodeContext(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.CodeContextRequest
	if err := decode(w, r, api.MaxJSONBodyBytes, &req); err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	c, err := s.agent.CreateCodeContext(r.Context(), id, &req)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) listCodeContexts(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	out, err := s.agent.ListCodeContexts(r.Context(), id)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// codeContextCall is a handler of a route on one context.
func codeContextCall(call func(c *agent.Client, r *http.Request, id, ctxID string) (*api.CodeContext, error)) keyedHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request, owner string) error {
		id, err := s.running(r, owner)
		if err != nil {
			return err
		}
		c, err := call(s.agent, r, id, r.PathValue("ctx"))
		if err != nil {
			return agentErr(r, err)
		}
		writeJSON(w, http.StatusOK, c)
		return nil
	}
}

var (
	getCodeContext = codeContextCall(func(c *agent.Client, r *http.Request, id, ctxID string) (*api.CodeContext, error) {
		return c.GetCodeContext(r.Context(), id, ctxID)
	})
	restartCodeContext = codeContextCall(func(c *agent.Client, r *http.Request, id, ctxID string) (*api.CodeContext, error) {
		return c.RestartCodeContext(r.Context(), id, ctxID)
	})
	interruptCodeContext = codeContextCall(func(c *agent.Client, r *http.Request, id, ctxID string) (*api.CodeContext, error) {
		return c.InterruptCodeContext(r.Context(), id, ctxID)
	})
)

func (s *Server) deleteCodeContext(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	if err := s.agent.DeleteCodeContext(r.Context(), id, r.PathValue("ctx")); err != nil {
		return agentErr(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
