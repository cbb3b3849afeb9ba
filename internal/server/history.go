package server

import (
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/manager"
)

// sandboxMetricsHistory answers the sandbox's metrics history
// (manager/history.go), oldest first.
func (s *Server) sandboxMetricsHistory(w http.ResponseWriter, r *http.Request, owner string) error {
	id := r.PathValue("id")
	h, err := s.mgr.MetricsHistory(r.Context(), owner, id)
	if err != nil {
		return err
	}
	out := api.MetricsHistory{SandboxID: id, MaxSamples: manager.HistorySamples, Samples: make([]api.MetricsSample, len(h))}
	for i, x := range h {
		out.Samples[i] = api.MetricsSample{At: x.At, CPUSeconds: x.CPUSeconds, MemoryBytes: x.MemoryBytes,
			NetworkRxBytes: x.NetRxBytes, NetworkTxBytes: x.NetTxBytes, PIDs: x.PIDs, CostMicros: x.CostMicros}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
