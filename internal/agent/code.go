package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"syscall"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/kernel"
)

// The code routes: stateful code contexts run by package kernel.

// newKernels returns the code context manager of s: interpreters start
// through forkExec (PID 1's reaper collects them) with the commands'
// environment.
func (s *Server) newKernels() *kernel.Manager {
	return kernel.NewManager(kernel.Config{
		Workdir: s.cfg.Workdir,
		Env: func(extra map[string]string) ([]string, error) {
			return commandEnv(s.baseEnv(), extra)
		},
		Start: func(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan struct{}, error) {
			pid, exit, err := forkExec(s.reaper, path, argv, attr)
			if err != nil {
				return 0, nil, err
			}
			done := make(chan struct{})
			go func() { <-exit; close(done) }()
			return pid, done, nil
		},
		Log: s.log,
	})
}

// codeRoutes adds the code routes to mux.
func (s *Server) codeRoutes(mux *http.ServeMux) {
	mux.Handle("POST /code", s.handle(s.handleRunCode))
	mux.Handle("POST /code/contexts", s.handle(s.handleCreateContext))
	mux.Handle("GET /code/contexts", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, api.CodeContextList{Contexts: s.code.List()})
		return nil
	}))
	mux.Handle("GET /code/contexts/{ctx}", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return answerContext(w, http.StatusOK)(s.code.Get(r.PathValue("ctx")))
	}))
	mux.Handle("DELETE /code/contexts/{ctx}", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		if err := s.code.Delete(r.PathValue("ctx")); err != nil {
			return codeErr(err)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	mux.Handle("POST /code/contexts/{ctx}/restart", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return answerContext(w, http.StatusOK)(s.code.Restart(r.PathValue("ctx")))
	}))
	mux.Handle("POST /code/contexts/{ctx}/interrupt", s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return answerContext(w, http.StatusOK)(s.code.Interrupt(r.PathValue("ctx")))
	}))
}

// answerContext writes a context or returns the error.
func answerContext(w http.ResponseWriter, status int) func(api.CodeContext, error) error {
	return func(c api.CodeContext, err error) error {
		if err != nil {
			return codeErr(err)
		}
		writeJSON(w, status, c)
		return nil
	}
}

// codeErr gives a kernel error its API code.
func codeErr(err error) error {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return &apiError{Code: ke.Code, Msg: ke.Msg, Err: err}
	}
	return err
}

func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) error {
	var req api.CodeContextRequest
	if err := decodeJSON(w, r, &req, maxJSONBytes, true); err != nil {
		return err
	}
	return answerContext(w, http.StatusCreated)(s.code.Create(req))
}

// handleRunCode runs a cell: one JSON CodeExecution, or NDJSON CodeEvents
// ended by "end".
func (s *Server) handleRunCode(w http.ResponseWriter, r *http.Request) error {
	var req api.CodeRequest
	if err := decodeJSON(w, r, &req, api.MaxCodeBytes+maxJSONBytes, false); err != nil {
		return err
	}
	if !wantsNDJSON(r) {
		res, err := s.code.Run(r.Context(), req, nil)
		if err != nil {
			return codeErr(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // SVG and HTML results would grow by a third
		return enc.Encode(res)
	}
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	started, failed := false, false
	send := func(ev api.CodeEvent) {
		if failed {
			return
		}
		if !started {
			started = true
			w.Header().Set("Content-Type", api.ContentTypeNDJSON)
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusOK)
		}
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			failed = true // the client went away; the cell is stopped by ctx
		}
	}
	res, err := s.code.Run(r.Context(), req, send)
	if err != nil {
		if started {
			send(api.CodeEvent{Type: api.CodeEventError, Error: &api.CodeError{Name: "PaddockError", Value: err.Error()}})
			return nil
		}
		return codeErr(err)
	}
	end := *res
	end.Stdout, end.Stderr, end.Results = "", "", []api.CodeResult{}
	send(api.CodeEvent{Type: api.CodeEventEnd, Execution: &end})
	return nil
}
