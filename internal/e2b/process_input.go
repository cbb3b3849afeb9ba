package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// input writes data (and EOF if eof) to the stdin of the selected process.
func (s *Server) input(ctx context.Context, id string, sel processSelector, in *processInput, eof bool) error {
	if in != nil && len(in.PTY) > 0 {
		return rpcErrorf(codeUnimplemented, "PTY input is not available on this endpoint")
	}
	p, err := s.findProcess(ctx, id, sel)
	if err != nil {
		return err
	}
	var data []byte
	if in != nil {
		data = in.Stdin
	}
	return s.agent.WriteStdin(ctx, id, p.ID, bytes.NewReader(data), int64(len(data)), eof)
}

func (s *Server) processSendInput(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processSelector `json:"process"`
		Input   *processInput   `json:"input"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if err := s.input(r.Context(), rec.ID, req.Process, req.Input, false); err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

func (s *Server) processCloseStdin(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processSelector `json:"process"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if err := s.input(r.Context(), rec.ID, req.Process, nil, true); err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// processStreamInput is the client stream of inputs: a start message
// naming the process, then data messages, in order.
func (s *Server) processStreamInput(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	st := newStream(w)
	if e := checkConnectRequest(r, true); e != nil {
		st.End(e)
		return
	}
	var sel *processSelector
	for {
		_, msg, err := readEnvelope(r.Body)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.End(err)
			return
		}
		var m struct {
			Start *struct {
				Process processSelector `json:"process"`
			} `json:"start"`
			Data *struct {
				Input *processInput `json:"input"`
			} `json:"data"`
		}
		if err := decodeMessage(msg, &m); err != nil {
			st.End(err)
			return
		}
		switch {
		case m.Start != nil:
			sel = &m.Start.Process
		case m.Data != nil:
			if sel == nil {
				st.End(rpcErrorf(codeInvalidArgument, "the first message must be start"))
				return
			}
			if err := s.input(r.Context(), rec.ID, *sel, m.Data.Input, false); err != nil {
				st.End(err)
				return
			}
		}
	}
	st.Send(struct{}{})
	st.End(nil)
}

// signalName maps envd's Signal enum (name or number) to a signal name.
func signalName(raw json.RawMessage) (string, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch strings.TrimPrefix(name, "SIGNAL_") {
		case "SIGKILL":
			return "SIGKILL", nil
		case "SIGTERM":
			return "SIGTERM", nil
		}
		return "", rpcErrorf(codeInvalidArgument, "unknown signal %q", name)
	}
	var n int
	if json.Unmarshal(raw, &n) == nil && (n == 9 || n == 15) {
		return map[int]string{9: "SIGKILL", 15: "SIGTERM"}[n], nil
	}
	return "", rpcErrorf(codeInvalidArgument, "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM")
}

func (s *Server) processSendSignal(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processSelector `json:"process"`
		Signal  json.RawMessage `json:"signal"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	sig, err := signalName(req.Signal)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	p, err := s.findProcess(r.Context(), rec.ID, req.Process)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	if err := s.agent.KillProcess(r.Context(), rec.ID, p.ID, sig); err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// processUpdate resizes a PTY; there are none on this endpoint, so it
// only checks that the process exists.
func (s *Server) processUpdate(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Process processSelector `json:"process"`
		PTY     *ptyConfig      `json:"pty"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if _, err := s.findProcess(r.Context(), rec.ID, req.Process); err != nil {
		writeUnaryError(w, err)
		return
	}
	if req.PTY != nil {
		writeUnaryError(w, rpcErrorf(codeUnimplemented, "PTY processes are not available on this endpoint"))
		return
	}
	writeUnary(w, struct{}{})
}
