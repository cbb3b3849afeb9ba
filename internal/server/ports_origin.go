package server

// Ports on their own origins: with a ports domain, port 8000 of sandbox
// sbX is served at <scheme>://8000-sbX.<domain>/, so a page in one
// sandbox shares no cookies or storage with the API or with another
// sandbox's page. The daemon routes by the Host header, on the API
// listener and on an optional wildcard listener (--ports-listen) that
// serves nothing else.

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// PortsConfig configures own-origin ports.
type PortsConfig struct {
	// Domain is the DNS name under which <port>-<id>.<Domain> resolves
	// (a wildcard record) to this daemon, optionally with the port
	// browsers use (":7420"). Empty: ports are served in the path form
	// only.
	Domain string
}

// portHost is the host name of a port's own origin (with the domain's
// port if it has one), "" without a domain.
func (s *Server) portHost(id string, port int) string {
	if s.cfg.Ports.Domain == "" {
		return ""
	}
	return fmt.Sprintf("%d-%s.%s", port, id, s.cfg.Ports.Domain)
}

// originURL is the signed own-origin URL of a port, "" without a domain.
func (s *Server) originURL(r *http.Request, id string, port int, tok string) string {
	h := s.portHost(id, port)
	if h == "" {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + h + "/?" + portTokenParam + "=" + tok
}

// parsePortHost reads "<port>-<id>" off a Host header under the ports
// domain.
func (s *Server) parsePortHost(host string) (id string, port int, ok bool) {
	d := s.cfg.Ports.Domain
	if d == "" {
		return "", 0, false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if dh, _, err := net.SplitHostPort(d); err == nil {
		d = dh
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+strings.ToLower(d))
	if !ok || strings.Contains(label, ".") {
		return "", 0, false
	}
	ps, id, ok := strings.Cut(label, "-")
	port, err := strconv.Atoi(ps)
	if !ok || err != nil || port < 1 || port > 65535 || id == "" {
		return "", 0, false
	}
	return id, port, true
}

// servePortOrigin serves r when its Host is a port's own origin and
// reports whether it did.
func (s *Server) servePortOrigin(w http.ResponseWriter, r *http.Request) bool {
	id, port, ok := s.parsePortHost(r.Host)
	if !ok {
		return false
	}
	tok := r.URL.Query().Get(portTokenParam)
	fromQuery := tok != ""
	if tok == "" {
		if c, err := r.Cookie(portTokenCookie); err == nil {
			tok = c.Value
		}
	}
	if !s.authorizePort(w, r, id, port, tok) {
		return true
	}
	if fromQuery && s.validPortToken(tok, id, port) {
		// The origin is the port's own: its cookie reaches nothing else.
		http.SetCookie(w, &http.Cookie{Name: portTokenCookie, Value: tok, Path: "/",
			Expires: time.Now().Add(portTokenTTL), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil})
	}
	s.reverseProxy(w, r, id, port, r.URL.Path, "", false)
	return true
}

// PortsHandler serves the wildcard ports listener (--ports-listen): own-
// origin ports only; any other host is 404, the API is not served there.
func (s *Server) PortsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r, done := s.guard(w, r)
		defer done()
		if !s.servePortOrigin(w, r) {
			writeError(w, fmt.Errorf("%w: %q is not <port>-<sandbox id>.%s", sandbox.ErrNotFound, r.Host, s.cfg.Ports.Domain))
		}
	})
}
