package e2b

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of the Connect protocol layer.
const (
	// maxRPCMessage bounds one request message (unary body or one
	// envelope); the largest legitimate one is SendInput with stdin.
	maxRPCMessage = 4 << 20
	// keepaliveDefault is the keepalive interval of a stream whose client
	// did not ask for one (Keepalive-Ping-Interval, seconds).
	keepaliveDefault = 50 * time.Second
)

// Connect error codes (connectrpc.com/docs/protocol#error-codes).
const (
	codeCanceled           = "canceled"
	codeUnknown            = "unknown"
	codeInvalidArgument    = "invalid_argument"
	codeDeadlineExceeded   = "deadline_exceeded"
	codeNotFound           = "not_found"
	codeAlreadyExists      = "already_exists"
	codePermissionDenied   = "permission_denied"
	codeResourceExhausted  = "resource_exhausted"
	codeFailedPrecondition = "failed_precondition"
	codeUnimplemented      = "unimplemented"
	codeInternal           = "internal"
	codeUnavailable        = "unavailable"
	codeUnauthenticated    = "unauthenticated"
)

// connectStatus is the HTTP status a unary error travels with.
var connectStatus = map[string]int{
	codeCanceled: 499, codeUnknown: 500, codeInvalidArgument: 400, codeDeadlineExceeded: 504,
	codeNotFound: 404, codeAlreadyExists: 409, codePermissionDenied: 403, codeResourceExhausted: 429,
	codeFailedPrecondition: 400, codeUnimplemented: 501, codeInternal: 500, codeUnavailable: 503,
	codeUnauthenticated: 401,
}

// rpcError is an error with a Connect code.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

func rpcErrorf(code, format string, a ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, a...)}
}

// writeUnaryError writes err as a Connect unary error.
func writeUnaryError(w http.ResponseWriter, err error) {
	e := toRPCError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(connectStatus[e.Code])
	json.NewEncoder(w).Encode(e)
}

// checkConnectRequest refuses what this server does not speak: the
// binary codec and compressed messages.
func checkConnectRequest(r *http.Request, stream bool) *rpcError {
	ct := r.Header.Get("Content-Type")
	want := "application/json"
	if stream {
		want = "application/connect+json"
	}
	if base, _, _ := strings.Cut(ct, ";"); strings.TrimSpace(base) != want {
		return rpcErrorf(codeUnimplemented, "content type %q is not supported (only the Connect JSON codec, %s)", ct, want)
	}
	enc := r.Header.Get("Content-Encoding")
	if stream {
		enc = r.Header.Get("Connect-Content-Encoding")
	}
	if enc != "" && enc != "identity" {
		return rpcErrorf(codeUnimplemented, "compression %q is not supported", enc)
	}
	return nil
}

// readUnary decodes a unary request body into v.
func readUnary(w http.ResponseWriter, r *http.Request, v any) error {
	if e := checkConnectRequest(r, false); e != nil {
		return e
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRPCMessage))
	if err != nil {
		return rpcErrorf(codeResourceExhausted, "request larger than %d bytes", maxRPCMessage)
	}
	return decodeMessage(body, v)
}

func decodeMessage(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return rpcErrorf(codeInvalidArgument, "bad request message: %v", err)
	}
	return nil
}

// writeUnary answers a unary call with v.
func writeUnary(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	json.NewEncoder(w).Encode(v)
}

// readEnvelope reads one enveloped message; io.EOF at a clean end.
func readEnvelope(r io.Reader) (flags byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, rpcErrorf(codeInvalidArgument, "truncated envelope")
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxRPCMessage {
		return 0, nil, rpcErrorf(codeResourceExhausted, "message of %d bytes is larger than %d", n, maxRPCMessage)
	}
	if hdr[0]&1 != 0 {
		return 0, nil, rpcErrorf(codeUnimplemented, "compressed messages are not supported")
	}
	msg = make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, rpcErrorf(codeInvalidArgument, "truncated envelope")
	}
	return hdr[0], msg, nil
}

// readStreamRequest decodes the one request message of a server stream.
func readStreamRequest(w http.ResponseWriter, r *http.Request, v any) error {
	if e := checkConnectRequest(r, true); e != nil {
		return e
	}
	_, msg, err := readEnvelope(http.MaxBytesReader(w, r.Body, maxRPCMessage+5))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return rpcErrorf(codeInvalidArgument, "missing request message")
		}
		return toRPCError(err)
	}
	return decodeMessage(msg, v)
}

// stream writes a Connect server stream. Send and End may be called from
// several goroutines.
type stream struct {
	mu    sync.Mutex
	w     http.ResponseWriter
	rc    *http.ResponseController
	begun bool
	ended bool
}

func newStream(w http.ResponseWriter) *stream {
	return &stream{w: w, rc: http.NewResponseController(w)}
}

func (s *stream) begin() {
	if !s.begun {
		s.begun = true
		s.w.Header().Set("Content-Type", "application/connect+json")
		s.w.WriteHeader(http.StatusOK)
	}
}

func (s *stream) frame(flags byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
	if _, err := s.w.Write(append(hdr[:], b...)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// Send writes one message.
func (s *stream) Send(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return io.ErrClosedPipe
	}
	s.begin()
	return s.frame(0, v)
}

// End writes the end-of-stream message, with err if not nil.
func (s *stream) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.begin()
	end := struct {
		Error *rpcError `json:"error,omitempty"`
	}{}
	if err != nil {
		end.Error = toRPCError(err)
	}
	s.frame(2, end)
}

// streamTimeout is the deadline a client gave a stream (Connect-Timeout-Ms),
// 0 if none.
func streamTimeout(r *http.Request) time.Duration {
	ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// keepaliveInterval is the interval a client asked for
// (Keepalive-Ping-Interval, seconds), bounded to [1s, 10min].
func keepaliveInterval(r *http.Request) time.Duration {
	s, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval"))
	if err != nil || s <= 0 {
		return keepaliveDefault
	}
	return time.Duration(min(max(s, 1), 600)) * time.Second
}
