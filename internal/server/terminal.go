package server

// The terminal and file-watch routes. A terminal is a WebSocket relayed
// message by message to the WebSocket the sandbox's agent serves, each
// message bounded; a watch is an NDJSON stream re-encoded event by event.
// Both go through s.running like every sandbox route.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/coder/websocket"
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// ptyQuery is what GET /pty passes on to the agent.
var ptyQuery = []string{"argv", "command", "cwd", "env", "cols", "rows"}

// openPty starts a terminal and relays its WebSocket. Errors before the
// upgrade (including the agent's) are JSON answers.
func (s *Server) openPty(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	q := url.Values{}
	for _, k := range ptyQuery {
		if v, ok := r.URL.Query()[k]; ok {
			q[k] = v
		}
	}
	up, err := s.agent.DialPTY(r.Context(), id, q)
	if err != nil {
		return agentErr(r, err)
	}
	defer up.CloseNow()
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept answered
	}
	defer c.CloseNow()
	c.SetReadLimit(agent.PTYMaxInput)
	relayWS(r.Context(), c, up)
	return nil
}

// relayWS copies messages both ways until either side closes, then closes
// the other with the same status.
func relayWS(ctx context.Context, client, up *websocket.Conn) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 2)
	pipe := func(dst, src *websocket.Conn) {
		for {
			typ, data, err := src.Read(ctx)
			if err != nil {
				done <- err
				return
			}
			if err := dst.Write(ctx, typ, data); err != nil {
				done <- err
				return
			}
		}
	}
	go pipe(up, client)
	go pipe(client, up)
	err := <-done
	st, reason := websocket.CloseStatus(err), ""
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		reason = ce.Reason
	}
	if st == -1 {
		st = websocket.StatusGoingAway
	}
	// Whichever side ended, close both; Close waits for the peer's close.
	go func() { _ = up.Close(st, reason) }()
	_ = client.Close(st, reason)
	cancel()
	<-done
}

func (s *Server) listPtys(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	out, err := s.agent.ListPTYs(r.Context(), id)
	if err != nil {
		return agentErr(r, err)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) killPty(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	if err := s.agent.KillPTY(r.Context(), id, r.PathValue("pty")); err != nil {
		return agentErr(r, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// watchFiles streams a directory's changes until the client goes away.
func (s *Server) watchFiles(w http.ResponseWriter, r *http.Request, owner string) error {
	recursive, err := boolQuery(r, "recursive")
	if err != nil {
		return err
	}
	id, err := s.running(r, owner)
	if err != nil {
		return err
	}
	evs, err := s.agent.WatchFiles(r.Context(), id, r.URL.Query().Get("path"), recursive)
	if err != nil {
		return agentErr(r, err)
	}
	defer evs.Close()
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return nil
	}
	enc := json.NewEncoder(w)
	for {
		ev, err := evs.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				s.log.Warn("watch stream from agent cut", "sandbox", id, "err", err)
			}
			return nil
		}
		if enc.Encode(ev) != nil || rc.Flush() != nil {
			return nil
		}
	}
}
