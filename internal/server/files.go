package server

// The file routes: typed calls through the agent client, which resolves
// every path inside the sandbox.

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func (s *Server) putFile(w http.ResponseWriter, r *http.Request, owner string) error {
	if r.ContentLength > s.cfg.MaxFileBytes {
		return fmt.Errorf("%w: file larger than %d bytes (--max-file-bytes)", sandbox.ErrTooLarge, s.cfg.MaxFileBytes)
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxFileBytes)
	e, err := s.agent.WriteFile(r.Context(), id, q.Get("path"), q.Get("mode"), body, r.ContentLength)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	f, err := s.agent.ReadFile(r.Context(), id, r.URL.Query().Get("path"), s.cfg.MaxFileBytes)
	if err != nil {
		return agentErr(r, err)
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if f.Size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, f)
	return nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request, owner string) error {
	recursive, err := boolQuery(r, "recursive")
	if err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	if err := s.agent.DeleteFile(r.Context(), id, r.URL.Query().Get("path"), recursive); err != nil {
		return agentErr(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, owner string) error {
	depth := 0
	if q := r.URL.Query().Get("depth"); q != "" {
		d, err := strconv.Atoi(q)
		if err != nil || d == 0 {
			return fmt.Errorf("%w: depth must be between 1 and %d", sandbox.ErrInvalid, api.MaxListDepth)
		}
		depth = d
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	out, err := s.agent.ListFiles(r.Context(), id, r.URL.Query().Get("path"), depth)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	e, err := s.agent.StatFile(r.Context(), id, r.URL.Query().Get("path"))
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := discardBody(w, r); err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	e, err := s.agent.Mkdir(r.Context(), id, q.Get("path"), q.Get("mode"))
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}
