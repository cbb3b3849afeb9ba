package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

const (
	portTokenParam  = "paddock_token"
	portTokenCookie = "paddock_port_token"
	portTokenTTL    = time.Hour
	// maxPortResponseHeader bounds the response headers a server in a
	// sandbox can send through the port proxy (502 past it).
	maxPortResponseHeader = 64 << 10
)

// newPortTransport is the transport to sandbox ports: bounded response
// headers, no compression (bodies stream through as they come).
func newPortTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		DialContext:            dial,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        30 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxPortResponseHeader,
	}
}

// portToken signs (sandbox, port, expiry).
func (s *Server) portToken(id string, port int, exp time.Time) string {
	buf := make([]byte, 8, 40)
	binary.BigEndian.PutUint64(buf, uint64(exp.Unix()))
	mac := hmac.New(sha256.New, s.cfg.PortKey)
	fmt.Fprintf(mac, "%s|%d|%d", id, port, exp.Unix())
	return base64.RawURLEncoding.EncodeToString(mac.Sum(buf))
}

func (s *Server) validPortToken(tok, id string, port int) bool {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 40 || len(s.cfg.PortKey) == 0 {
		return false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(raw[:8])), 0)
	if time.Now().After(exp) {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(s.portToken(id, port, exp))
	return subtle.ConstantTimeCompare(raw, want) == 1
}

// listPorts answers GET /v1/sandboxes/{id}/ports.
func (s *Server) listPorts(w http.ResponseWriter, r *http.Request, owner string) error {
	id := r.PathValue("id")
	if _, err := s.mgr.Running(r.Context(), owner, id); err != nil {
		return err
	}
	ports, err := s.agent.Ports(r.Context(), id)
	if err != nil {
		return agentErr(r, err)
	}
	base := externalBase(r)
	exp := time.Now().Add(portTokenTTL).Truncate(time.Second)
	out := api.ListPortsResponse{Ports: []api.Port{}}
	for _, p := range ports {
		u := fmt.Sprintf("%s/v1/sandboxes/%s/ports/%d/", base, id, p.Port)
		tok := s.portToken(id, p.Port, exp)
		out.Ports = append(out.Ports, api.Port{
			Port: p.Port, Address: p.Address, URL: u,
			SignedURL:          u + "?" + portTokenParam + "=" + tok,
			SignedURLExpiresAt: exp.UTC(),
			OriginURL:          s.originURL(r, id, p.Port, tok),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// externalBase is the scheme and host the client used to reach the API.
func externalBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// proxyPort serves /v1/sandboxes/{id}/ports/{port}/{path...}, the path
// form: a reverse proxy (HTTP and WebSocket) to that port inside the
// sandbox, reached through the guest agent. It accepts the owner's API
// key or a signed token in the query; other keys get 404. The path form
// shares the API's origin, so it carries no cookies either way: Cookie
// headers are not forwarded and Set-Cookie answers are dropped (browsers
// use the own-origin form, ports_origin.go). Credentials are never
// forwarded.
func (s *Server) proxyPort(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, fmt.Errorf("%w: port must be 1-65535", sandbox.ErrInvalid))
		return
	}
	if !s.authorizePort(w, r, id, port, r.URL.Query().Get(portTokenParam)) {
		return
	}
	prefix := fmt.Sprintf("/v1/sandboxes/%s/ports/%d", id, port)
	s.reverseProxy(w, r, id, port, "/"+r.PathValue("path"), prefix, true)
}

// authorizePort checks the owner's API key or tok for (id, port) and that
// the sandbox is running, answering the error itself when not.
func (s *Server) authorizePort(w http.ResponseWriter, r *http.Request, id string, port int, tok string) bool {
	authorized := false
	if owner, ok := s.auth(r); ok {
		if _, err := s.mgr.Get(r.Context(), owner, id); err != nil {
			writeError(w, err)
			return false
		}
		authorized = true
	}
	if !authorized && tok != "" {
		authorized = s.validPortToken(tok, id, port)
	}
	if !authorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
		writeError(w, fmt.Errorf("%w: an API key or a signed port URL is required", sandbox.ErrUnauthorized))
		return false
	}
	defer s.mgr.Active("", id)() // port traffic is activity (idle timeouts)
	if _, err := s.mgr.RunningAny(r.Context(), id); err != nil {
		writeError(w, err)
		return false
	}
	return true
}

// reverseProxy relays r to port of sandbox id at path. noCookies (the
// path form) drops every Cookie and Set-Cookie; otherwise only the port
// token cookie is kept from the sandbox.
func (s *Server) reverseProxy(w http.ResponseWriter, r *http.Request, id string, port int, path, prefix string, noCookies bool) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", fmt.Sprintf("p%d.%s", port, id)
			pr.Out.URL.Path = path
			pr.Out.URL.RawPath = ""
			q := pr.Out.URL.Query()
			q.Del(portTokenParam)
			pr.Out.URL.RawQuery = q.Encode()
			pr.Out.Header.Del("Authorization")
			if noCookies {
				pr.Out.Header.Del("Cookie")
			} else {
				stripCookie(pr.Out, portTokenCookie)
			}
			pr.SetXForwarded()
			if prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			}
		},
		Transport: s.portTransport,
		ModifyResponse: func(resp *http.Response) error {
			if noCookies {
				resp.Header.Del("Set-Cookie")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, fmt.Errorf("%w: port %d: %v", sandbox.ErrUnavailable, port, err))
		},
	}
	rp.ServeHTTP(w, r)
}

// stripCookie removes one cookie from a request's Cookie headers.
func stripCookie(r *http.Request, name string) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// dialPort connects to a port inside a sandbox through its agent. addr is
// "p<port>.<sandbox id>:80", as set by proxyPort.
func (s *Server) dialPort(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	ps, id, ok := strings.Cut(host, ".")
	port, err := strconv.Atoi(strings.TrimPrefix(ps, "p"))
	if !ok || err != nil {
		return nil, fmt.Errorf("bad port address %q", addr)
	}
	return s.agent.DialPort(ctx, id, port)
}
