package client

import (
	"context"
	"net/http"

	"github.com/paddock-sandbox/paddock/api"
)

// MetricsHistory returns the sandbox's metrics over time, oldest first:
// one sample per metering pass of the daemon, at most
// api.MetricsHistory.MaxSamples.
func (s *Sandbox) MetricsHistory(ctx context.Context) (*api.MetricsHistory, error) {
	var h api.MetricsHistory
	if err := s.c.call(ctx, http.MethodGet, sandboxPath(s.ID, "metrics", "history"), nil, nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}
