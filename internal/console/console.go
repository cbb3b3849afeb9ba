// Package console is the web console paddockd serves at / and /console/:
// static assets embedded in the binary (built from TypeScript in web/ by
// `make build`), sign-in with an API key exchanged for a short-lived
// session cookie, and /console/v1/..., which forwards to the REST API with
// the session's key, so a console request goes through exactly the auth,
// tenant scoping and limits of the API.
//
// The cookie is HttpOnly, SameSite=Strict, Path=/console/ and holds only a
// random session id; the session table (session.go) is bounded and
// expiring. Every state-changing request carries the session's CSRF token
// in the X-Paddock-CSRF header, cross-site requests (Origin or
// Sec-Fetch-Site) are refused, and every page is served under a strict
// Content-Security-Policy (assets.go). The /v1 API itself never accepts the
// cookie: browsers do not send it there (Path), and the API reads only
// "Authorization: Bearer".
package console

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Names the browser sees.
const (
	// CookieName is the session cookie.
	CookieName = "paddock_console"
	// CookiePath scopes the cookie to the console.
	CookiePath = "/console/"
	// CSRFHeader carries the session's CSRF token on state-changing calls.
	CSRFHeader = "X-Paddock-CSRF"
	// maxSignInBody bounds the sign-in request.
	maxSignInBody = 4 << 10
)

// Config configures the console.
type Config struct {
	// Lookup checks an API key and returns its id (store.Keys.Lookup).
	Lookup func(secret string) (id string, ok bool)
	// API serves the /v1 routes; /console/v1/x is forwarded to it as /v1/x.
	API http.Handler
	// Session bounds; zero values take the defaults of session.go.
	IdleTTL, MaxTTL        time.Duration
	MaxSessions, MaxPerKey int
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Handler serves the console.
type Handler struct {
	cfg      Config
	sessions *sessions
	mux      *http.ServeMux
}

// New returns the console handler.
func New(cfg Config) *Handler {
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = DefaultIdleTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = DefaultMaxTTL
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxPerKey <= 0 {
		cfg.MaxPerKey = DefaultMaxPerKey
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(),
		sessions: newSessions(cfg.IdleTTL, cfg.MaxTTL, cfg.MaxSessions, cfg.MaxPerKey, cfg.Now)}
	h.mux.HandleFunc("GET /{$}", h.serveIndex)
	h.mux.HandleFunc("GET /console/{$}", h.serveIndex)
	h.mux.HandleFunc("GET /console/assets/{name}", h.serveAsset)
	h.mux.HandleFunc("POST /console/session", h.signIn)
	h.mux.HandleFunc("GET /console/session", h.whoami)
	h.mux.HandleFunc("DELETE /console/session", h.signOut)
	h.mux.HandleFunc("/console/v1/", h.forward)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, api.CodeNotFound, "no console page "+r.URL.Path)
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// SessionInfo is what sign-in and GET /console/session answer.
type SessionInfo struct {
	KeyID     string    `json:"key_id"`
	CSRFToken string    `json:"csrf_token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if !sameOrigin(r, true) {
		writeErr(w, api.CodeUnauthorized, "sign-in must come from the console's own origin")
		return
	}
	var body struct {
		Key string `json:"key"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSignInBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeErr(w, api.CodeBadRequest, "expected {\"key\": \"pdk_...\"}")
		return
	}
	keyID, ok := h.cfg.Lookup(strings.TrimSpace(body.Key))
	if !ok {
		writeErr(w, api.CodeUnauthorized, "unknown API key")
		return
	}
	id, x, err := h.sessions.create(keyID, strings.TrimSpace(body.Key))
	if errors.Is(err, errFull) {
		writeErr(w, api.CodeLimitExceeded, err.Error())
		return
	}
	h.cfg.Log.Info("console sign-in", "key", keyID)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: CookiePath,
		MaxAge: int(h.cfg.MaxTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	writeJSON(w, http.StatusOK, SessionInfo{KeyID: keyID, CSRFToken: x.csrf, ExpiresAt: h.sessions.expiresAt(x)})
}

// whoami answers the session's info (the page reads its CSRF token here
// after a reload); only same-origin scripts can read the answer.
func (h *Handler) whoami(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	x, ok := h.session(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, SessionInfo{KeyID: x.keyID, CSRFToken: x.csrf, ExpiresAt: h.sessions.expiresAt(x)})
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	noStore(w)
	if _, ok := h.session(w, r); !ok {
		return
	}
	c, _ := r.Cookie(CookieName)
	h.sessions.remove(c.Value)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: CookiePath, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// session authenticates a console request: a live session cookie, a
// same-origin request, and on a state-changing method or a WebSocket
// upgrade the CSRF token or an Origin equal to the console's. It answers
// the error itself when it returns false.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		writeErr(w, api.CodeUnauthorized, "not signed in")
		return session{}, false
	}
	x, ok := h.sessions.get(c.Value)
	if !ok {
		writeErr(w, api.CodeUnauthorized, "session expired: sign in again")
		return session{}, false
	}
	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	if !sameOrigin(r, upgrade) {
		writeErr(w, api.CodeUnauthorized, "cross-origin console request refused")
		return session{}, false
	}
	if !safeMethod(r.Method) && !csrfOK(x, r.Header.Get(CSRFHeader)) {
		writeErr(w, api.CodeUnauthorized, "missing or wrong "+CSRFHeader+" header")
		return session{}, false
	}
	return x, true
}

// notForwarded are the API paths the console does not serve: the port
// proxy (a sandbox's own web pages must never be documents of the
// console's origin; they have origins of their own) and MCP.
var notForwarded = regexp.MustCompile(`^/v1/(mcp(/|$)|sandboxes/[^/]+/ports/[^/]+)`)

// forward serves /console/v1/x as the API's /v1/x with the session's key.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request) {
	x, ok := h.session(w, r)
	if !ok {
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/console")
	if path.Clean(p) != p || notForwarded.MatchString(p) {
		writeErr(w, api.CodeNotFound, "not served through the console: "+p)
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = p
	r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, "/console")
	r2.RequestURI = r2.URL.RequestURI()
	r2.Header.Del("Cookie")
	r2.Header.Del(CSRFHeader)
	r2.Header.Set("Authorization", "Bearer "+x.key)
	// Whatever the API returns (a sandbox's file, its output) is data:
	// never a document that runs in the console's origin.
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; sandbox; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	noStore(w)
	h.cfg.API.ServeHTTP(w, r2)
}

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sameOrigin refuses a request that a browser marks as cross-site. An
// Origin header, when present, must be this host's; need requires one
// (sign-in and WebSocket upgrades, which a browser always sends it with).
func sameOrigin(r *http.Request, need bool) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return !need
	}
	// The host (with its port) must be this one; either scheme, so that a
	// proxy terminating TLS in front of the daemon works.
	host, ok := strings.CutPrefix(o, "https://")
	if !ok {
		host, ok = strings.CutPrefix(o, "http://")
	}
	return ok && host == r.Host
}

func noStore(w http.ResponseWriter) { w.Header().Set("Cache-Control", "no-store") }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeErr answers the API's error shape with the status of code.
func writeErr(w http.ResponseWriter, code, msg string) {
	writeJSON(w, api.StatusOf(code), api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}
