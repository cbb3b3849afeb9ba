package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

func toAPI(r *store.Record) api.Sandbox {
	md := r.Metadata
	if md == nil {
		md = map[string]string{}
	}
	out := api.Sandbox{
		ID: r.ID, Template: r.Template, State: string(r.State),
		CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Metadata: md,
		Resources: api.Resources{
			VCPUs: r.Resources.VCPUs, MemoryMiB: r.Resources.MemoryMiB,
			DiskMiB: r.Resources.DiskMiB, PIDs: r.Resources.PIDs,
		},
		Runtime: r.Runtime, EndedAt: r.EndedAt, Reason: r.Reason,
		OnTimeout: r.OnTimeout, MaxCostMicros: r.MaxCostMicros, PausedAt: r.PausedAt,
	}
	if out.OnTimeout == "" {
		out.OnTimeout = api.OnTimeoutKill
	}
	out.Network = api.NetworkPolicy{Mode: r.Network.Mode, Allow: r.Network.Allow, Deny: r.Network.Deny}
	if out.Network.Mode == "" {
		out.Network.Mode = api.NetworkOff
	}
	out.Secrets = r.Secrets
	out.StoppedAt, out.StopAt = r.StoppedAt, r.StopAt
	if r.Idle.TimeoutSeconds > 0 {
		out.IdleTimeoutSeconds, out.OnIdle = r.Idle.TimeoutSeconds, r.Idle.OnIdle
	}
	out.AutoResume, out.IdleCountsProcesses = r.Idle.AutoResume, r.Idle.CountProcesses
	for _, e := range r.History {
		out.History = append(out.History, api.LifecycleEvent{At: e.At, State: string(e.State), Reason: e.Reason})
	}
	return out
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.CreateSandboxRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	start := time.Now()
	rec, err := s.mgr.Create(r.Context(), owner, createRequest(req))
	if err != nil {
		return err
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.createTime.Observe(time.Since(start).Seconds())
	}
	writeJSON(w, http.StatusCreated, toAPI(rec))
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	f := manager.Filter{State: q.Get("state"), Cursor: q.Get("cursor"), Metadata: map[string]string{}}
	if f.State != "" && !slices.Contains(manager.States(), f.State) {
		return fmt.Errorf("%w: state must be one of %s", sandbox.ErrInvalid, strings.Join(manager.States(), ", "))
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("%w: limit must be 1-1000", sandbox.ErrInvalid)
		}
		f.Limit = n
	}
	for k, v := range q {
		if mk, ok := strings.CutPrefix(k, "metadata."); ok && len(v) > 0 {
			f.Metadata[mk] = v[0]
		} else if mk, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(mk, "]") && len(v) > 0 {
			f.Metadata[strings.TrimSuffix(mk, "]")] = v[0]
		}
	}
	recs, next, err := s.mgr.List(r.Context(), owner, f)
	if err != nil {
		return err
	}
	out := api.ListSandboxesResponse{Sandboxes: make([]api.Sandbox, 0, len(recs)), NextCursor: next}
	for _, rec := range recs {
		out.Sandboxes = append(out.Sandboxes, toAPI(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	rec, err := s.mgr.Get(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := s.mgr.Delete(r.Context(), owner, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.SetTimeoutRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	if req.TimeoutSeconds <= 0 {
		return fmt.Errorf("%w: timeout_seconds must be positive", sandbox.ErrInvalid)
	}
	rec, err := s.mgr.SetTimeout(r.Context(), owner, r.PathValue("id"), req.TimeoutSeconds)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.PauseRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	rec, err := s.mgr.Pause(r.Context(), owner, r.PathValue("id"),
		sandbox.Retention{KeepForSeconds: req.KeepForSeconds, ThenStopAfterSeconds: req.ThenStopAfterSeconds})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	rec, err := s.mgr.Resume(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) stopSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	var req api.StopRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	rec, err := s.mgr.Stop(r.Context(), owner, r.PathValue("id"), req.KeepForSeconds)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	rec, err := s.mgr.Start(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toAPI(rec))
	return nil
}

func (s *Server) sandboxMetrics(w http.ResponseWriter, r *http.Request, owner string) error {
	m, err := s.mgr.Metrics(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, metrics(m))
	return nil
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, owner string) error {
	q := r.URL.Query()
	to := time.Now().UTC()
	from := to.Add(-24 * time.Hour)
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return fmt.Errorf("%w: %s must be an RFC 3339 time", sandbox.ErrInvalid, p.name)
			}
			*p.dst = t
		}
	}
	u, err := s.mgr.Usage(r.Context(), owner, from, to)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, usage(u))
	return nil
}
