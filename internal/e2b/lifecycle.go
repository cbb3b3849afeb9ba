package e2b

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func (s *Server) kill(w http.ResponseWriter, r *http.Request, owner string) error {
	if _, err := s.live(r, owner); err != nil {
		return err
	}
	if err := s.mgr.Delete(r.Context(), owner, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, owner string) error {
	var b struct {
		Timeout int64 `json:"timeout"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if b.Timeout <= 0 {
		return fmt.Errorf("%w: timeout must be a positive number of seconds", sandbox.ErrInvalid)
	}
	if _, err := s.live(r, owner); err != nil {
		return err
	}
	if _, err := s.mgr.SetTimeout(r.Context(), owner, r.PathValue("id"), b.Timeout); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// pause answers 409 for a sandbox that is not running (the SDK's pause
// then returns false).
func (s *Server) pause(w http.ResponseWriter, r *http.Request, owner string) error {
	if _, err := s.live(r, owner); err != nil {
		return err
	}
	if _, err := s.mgr.Pause(r.Context(), owner, r.PathValue("id"), sandbox.Retention{}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect resumes a paused sandbox (201) or returns a running one (200),
// extending its lease to timeout seconds from now if that is later.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, owner string) error {
	var b struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	rec, err := s.live(r, owner)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if rec.State == sandbox.Paused || rec.State == sandbox.Stopped { // Resume boots a stopped one
		if rec, err = s.mgr.Resume(r.Context(), owner, rec.ID); err != nil {
			return err
		}
		status = http.StatusCreated
	}
	if b.Timeout != nil && *b.Timeout > 0 && time.Now().Add(time.Duration(*b.Timeout)*time.Second).After(rec.ExpiresAt) {
		if rec, err = s.mgr.SetTimeout(r.Context(), owner, rec.ID, *b.Timeout); err != nil {
			return err
		}
	}
	writeJSON(w, status, s.created(rec))
	return nil
}

// refresh is the legacy keep-alive: a new lease of duration seconds.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, owner string) error {
	var b struct {
		Duration int64 `json:"duration"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if b.Duration > 0 {
		if _, err := s.mgr.SetTimeout(r.Context(), owner, r.PathValue("id"), b.Duration); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// metrics answers one sample, the current one.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, owner string) error {
	rec, err := s.live(r, owner)
	if err != nil {
		return err
	}
	m, err := s.mgr.Metrics(r.Context(), owner, rec.ID)
	if err != nil {
		return err
	}
	cpus := max(int(math.Ceil(rec.Resources.VCPUs)), 1)
	pct := 0.0
	if m.RunningSeconds > 0 {
		pct = min(100, 100*m.CPUSeconds/m.RunningSeconds/float64(cpus))
	}
	ts := m.SampledAt
	if ts.IsZero() {
		ts = time.Now()
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"timestamp": ts.UTC().Format(time.RFC3339Nano), "timestampUnix": ts.Unix(),
		"cpuUsedPct": pct, "cpuCount": cpus,
		"memUsed": m.MemoryBytes, "memTotal": rec.Resources.MemoryMiB << 20, "memCache": 0,
		"diskUsed": m.DiskBytes, "diskTotal": rec.Resources.DiskMiB << 20,
	}})
	return nil
}

// logs answers no log lines: Paddock keeps no sandbox system log.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, owner string) error {
	if _, err := s.live(r, owner); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": []any{}, "logEntries": []any{}})
	return nil
}

// network replaces the egress policy (PUT /sandboxes/{id}/network).
func (s *Server) network(w http.ResponseWriter, r *http.Request, owner string) error {
	var b struct {
		e2bNetwork
		AllowInternetAccess *bool `json:"allow_internet_access"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	if _, err := s.live(r, owner); err != nil {
		return err
	}
	p := policy(b.AllowInternetAccess, &b.e2bNetwork)
	if p == nil {
		p = &sandbox.NetworkPolicy{Mode: sandbox.NetworkOff}
	}
	if _, err := s.mgr.UpdateNetwork(r.Context(), owner, r.PathValue("id"), *p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
