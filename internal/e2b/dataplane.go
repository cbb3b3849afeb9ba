package e2b

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// rpcHandler serves one Connect method for a running sandbox.
type rpcHandler func(w http.ResponseWriter, r *http.Request, rec *store.Record)

// envdRoutes are envd's Connect methods and HTTP routes.
func (s *Server) envdRoutes() map[string]rpcHandler {
	return map[string]rpcHandler{
		"/process.Process/Start":                  s.processStart,
		"/process.Process/Connect":                s.processConnect,
		"/process.Process/List":                   s.processList,
		"/process.Process/SendInput":              s.processSendInput,
		"/process.Process/StreamInput":            s.processStreamInput,
		"/process.Process/SendSignal":             s.processSendSignal,
		"/process.Process/CloseStdin":             s.processCloseStdin,
		"/process.Process/Update":                 s.processUpdate,
		"/filesystem.Filesystem/Stat":             s.fsStat,
		"/filesystem.Filesystem/MakeDir":          s.fsMakeDir,
		"/filesystem.Filesystem/Move":             s.fsMove,
		"/filesystem.Filesystem/ListDir":          s.fsListDir,
		"/filesystem.Filesystem/Remove":           s.fsRemove,
		"/filesystem.Filesystem/WatchDir":         s.fsWatchDir,
		"/filesystem.Filesystem/CreateWatcher":    s.fsCreateWatcher,
		"/filesystem.Filesystem/GetWatcherEvents": s.fsGetWatcherEvents,
		"/filesystem.Filesystem/RemoveWatcher":    s.fsRemoveWatcher,
	}
}

// sandboxGone answers a request for a sandbox that is not running the way
// E2B's edge does: 502 with a JSON body, which the SDKs turn into their
// TimeoutError ("the sandbox was probably killed or timed out").
func sandboxGone(w http.ResponseWriter, id string, err error) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "code": http.StatusBadGateway,
		"message": fmt.Sprintf("The sandbox %s was not found or is not running: %v", id, err)})
}

// dataPlane serves a request for port of sandbox id.
func (s *Server) dataPlane(w http.ResponseWriter, r *http.Request, id string, port int) {
	if port == CodePort {
		s.codeInterpreter(w, r, id)
		return
	}
	if port != EnvdPort {
		s.proxyPort(w, r, id, port)
		return
	}
	path := r.URL.Path
	signed := r.Method != http.MethodPost || path != "/files" // upload and download URLs may be signed
	if !equalToken(r.Header.Get("X-Access-Token"), s.accessToken(id)) && !(path == "/files" && signed && s.validSignature(r, id)) &&
		path != "/health" {
		writeUnauthorized(w, path, id)
		return
	}
	rec, err := s.mgr.RunningAny(r.Context(), id)
	if err != nil {
		sandboxGone(w, id, err)
		return
	}
	switch {
	case path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusNoContent)
	case path == "/files" && r.Method == http.MethodGet:
		s.download(w, r, rec)
	case path == "/files" && r.Method == http.MethodPost:
		s.upload(w, r, rec)
	case path == "/envs" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, nonNilMap(rec.Env))
	case path == "/init" || path == "/sync":
		w.WriteHeader(http.StatusNoContent)
	default:
		h, ok := s.envdRoutes()[path]
		if !ok || r.Method != http.MethodPost {
			writeUnaryError(w, rpcErrorf(codeUnimplemented, "%s %s is not served", r.Method, path))
			return
		}
		h(w, r, rec)
	}
}

func writeUnauthorized(w http.ResponseWriter, path, id string) {
	msg := fmt.Sprintf("sandbox %s: missing or wrong X-Access-Token (the envdAccessToken of create or connect)", id)
	if strings.Count(path, "/") == 2 && !strings.HasPrefix(path, "/files") {
		writeUnaryError(w, rpcErrorf(codeUnauthenticated, "%s", msg))
		return
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{"code": http.StatusUnauthorized, "message": msg})
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// proxyPort reverse-proxies (HTTP and WebSocket) a request to port inside
// sandbox id. Ports are public by sandbox id, as on E2B, unless the
// sandbox was created with allowPublicTraffic false; then the request
// needs its trafficAccessToken in the e2b-traffic-access-token header.
// Credentials are not forwarded.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request, id string, port int) {
	rec, err := s.mgr.RunningAny(r.Context(), id)
	if err != nil {
		sandboxGone(w, id, err)
		return
	}
	if rec.Metadata[metaPrivate] == "true" && !equalToken(r.Header.Get("E2b-Traffic-Access-Token"), s.trafficToken(id)) {
		writeJSON(w, http.StatusForbidden, map[string]any{"code": http.StatusForbidden,
			"message": "this sandbox's ports need its trafficAccessToken in the e2b-traffic-access-token header"})
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", fmt.Sprintf("p%d.%s", port, id)
			pr.Out.Host = r.Host
			for _, h := range []string{"E2b-Traffic-Access-Token", "X-Access-Token", "X-Api-Key", "E2b-Sandbox-Id", "E2b-Sandbox-Port"} {
				pr.Out.Header.Del(h)
			}
			pr.SetXForwarded()
		},
		Transport: s.portTransport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeJSON(w, http.StatusBadGateway, map[string]any{"code": http.StatusBadGateway,
				"message": fmt.Sprintf("port %d of sandbox %s is not reachable: %v", port, id, err)})
		},
	}
	rp.ServeHTTP(w, r)
}

// dialPort connects to a port inside a sandbox through its agent. addr is
// "p<port>.<sandbox id>:80", as set by proxyPort.
func (s *Server) dialPort(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	ps, id, ok := strings.Cut(host, ".")
	port, err := strconv.Atoi(strings.TrimPrefix(ps, "p"))
	if !ok || err != nil {
		return nil, fmt.Errorf("%w: bad port address %q", sandbox.ErrInvalid, addr)
	}
	return s.agent.DialPort(ctx, id, port)
}
