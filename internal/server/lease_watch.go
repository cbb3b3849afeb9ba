package server

import (
	"context"
	"net/http"
	"time"
)

// leaseCheckInterval is how often a running exec checks that its sandbox
// was not paused at the end of its lease.
const leaseCheckInterval = time.Second

// untilPaused returns a context that ends with r's, or once sandbox id has
// been paused because its lease ended. A sandbox killed at its lease's end
// breaks its agent connections by itself; a paused one freezes them, and
// an exec call or stream would wait for as long as the pause lasts. The
// caller then answers with the manager's EndedDuring error.
func (s *Server) untilPaused(r *http.Request, id string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		t := time.NewTicker(leaseCheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if s.mgr.ExpiredPaused(id) {
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}
