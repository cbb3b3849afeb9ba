package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const testKey = "pdk_testkey"

// echoAPI answers what the API would see of a forwarded request.
func echoAPI(w http.ResponseWriter, r *http.Request) {
	json.NewEncoder(w).Encode(map[string]string{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
		"auth": r.Header.Get("Authorization"), "cookie": r.Header.Get("Cookie"), "csrf": r.Header.Get(CSRFHeader),
	})
}

func newTestHandler(clock *time.Time) *Handler {
	return New(Config{
		Lookup: func(s string) (string, bool) {
			if strings.HasPrefix(s, testKey) {
				return "key_" + strings.TrimPrefix(s, testKey), true
			}
			return "", false
		},
		API:       http.HandlerFunc(echoAPI),
		MaxPerKey: 2, MaxSessions: 3,
		Now: func() time.Time { return *clock },
	})
}

// signIn signs in key and returns the session cookie and CSRF token.
func signIn(t *testing.T, h http.Handler, key string) (*http.Cookie, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "http://paddock.test/console/session", strings.NewReader(`{"key":"`+key+`"}`))
	req.Header.Set("Origin", "http://paddock.test")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	var info SessionInfo
	json.Unmarshal(rec.Body.Bytes(), &info)
	cs := rec.Result().Cookies()
	if len(cs) != 1 || info.CSRFToken == "" {
		t.Fatalf("sign-in: cookies %v, info %+v", cs, info)
	}
	return cs[0], info.CSRFToken
}

func TestSignInCookie(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newTestHandler(&now)
	c, _ := signIn(t, h, testKey+"a")
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != CookiePath || c.MaxAge != int(DefaultMaxTTL.Seconds()) {
		t.Errorf("cookie = %+v; want HttpOnly, SameSite=Strict, Path=%s, Max-Age=%v", c, CookiePath, DefaultMaxTTL)
	}
	if strings.Contains(c.Value, testKey) {
		t.Error("the cookie holds the API key")
	}
}

func TestSignInRefused(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newTestHandler(&now)
	for _, tc := range []struct {
		name, body, origin, site string
		want                     int
	}{
		{"unknown key", `{"key":"pdk_other"}`, "http://paddock.test", "", 401},
		{"no origin", `{"key":"` + testKey + `"}`, "", "", 401},
		{"other origin", `{"key":"` + testKey + `"}`, "http://evil.test", "", 401},
		{"other port", `{"key":"` + testKey + `"}`, "http://paddock.test:8080", "", 401},
		{"other scheme", `{"key":"` + testKey + `"}`, "ftp://paddock.test", "", 401},
		{"null origin", `{"key":"` + testKey + `"}`, "null", "", 401},
		{"cross-site fetch", `{"key":"` + testKey + `"}`, "http://paddock.test", "cross-site", 401},
		{"not json", `key=x`, "http://paddock.test", "", 400},
		{"unknown field", `{"key":"` + testKey + `","x":1}`, "http://paddock.test", "", 400},
		{"too large", `{"key":"` + strings.Repeat("a", maxSignInBody) + `"}`, "http://paddock.test", "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://paddock.test/console/session", strings.NewReader(tc.body))
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want || len(rec.Result().Cookies()) != 0 {
				t.Errorf("got %d (cookies %v) %s; want %d and no cookie", rec.Code, rec.Result().Cookies(), rec.Body, tc.want)
			}
		})
	}
}

func TestForward(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newTestHandler(&now)
	c, csrf := signIn(t, h, testKey+"a")
	// A wrong token differs from the right one in its first byte (always:
	// prefixing "x" was the right token whenever it began with "x").
	wrong := "x" + csrf[1:]
	if csrf[0] == 'x' {
		wrong = "y" + csrf[1:]
	}
	for _, tc := range []struct {
		name, method, path string
		cookie             bool
		csrf, origin, site string
		upgrade            bool
		want               int
	}{
		{"get", "GET", "/console/v1/sandboxes?state=running", true, "", "", "", false, 200},
		{"get same-origin", "GET", "/console/v1/sandboxes", true, "", "http://paddock.test", "same-origin", false, 200},
		{"no cookie", "GET", "/console/v1/sandboxes", false, "", "", "", false, 401},
		{"post without csrf", "POST", "/console/v1/sandboxes", true, "", "http://paddock.test", "", false, 401},
		{"post wrong csrf", "POST", "/console/v1/sandboxes", true, wrong, "http://paddock.test", "", false, 401},
		{"delete with csrf", "DELETE", "/console/v1/sandboxes/sb_1", true, csrf, "http://paddock.test", "", false, 200},
		{"post with csrf, https origin (a TLS proxy in front)", "POST", "/console/v1/sandboxes", true, csrf, "https://paddock.test", "", false, 200},
		{"post with csrf, cross-site", "POST", "/console/v1/sandboxes", true, csrf, "http://evil.test", "", false, 401},
		{"get cross-site", "GET", "/console/v1/sandboxes", true, "", "", "cross-site", false, 401},
		{"get same-site (a sandbox port's origin)", "GET", "/console/v1/sandboxes", true, "", "", "same-site", false, 401},
		{"upgrade same origin", "GET", "/console/v1/sandboxes/sb_1/pty", true, "", "http://paddock.test", "", true, 200},
		{"upgrade without origin", "GET", "/console/v1/sandboxes/sb_1/pty", true, "", "", "", true, 401},
		{"port proxy", "GET", "/console/v1/sandboxes/sb_1/ports/8000/", true, "", "", "", false, 404},
		{"port proxy, no path", "GET", "/console/v1/sandboxes/sb_1/ports/8000", true, "", "", "", false, 404},
		{"port list", "GET", "/console/v1/sandboxes/sb_1/ports", true, "", "", "", false, 200},
		{"mcp", "POST", "/console/v1/mcp", true, csrf, "", "", false, 404},
		{"unclean path (redirected to the clean one)", "GET", "/console/v1/sandboxes/../mcp", true, "", "", "", false, 307},
		{"upgrade other origin", "GET", "/console/v1/sandboxes/sb_1/pty", true, "", "http://evil.test", "", true, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://paddock.test"+tc.path, nil)
			if tc.cookie {
				req.AddCookie(c)
			}
			for k, v := range map[string]string{CSRFHeader: tc.csrf, "Origin": tc.origin, "Sec-Fetch-Site": tc.site} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			if tc.upgrade {
				req.Header.Set("Upgrade", "websocket")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("got %d %s; want %d", rec.Code, rec.Body, tc.want)
			}
			if tc.want != 200 {
				return
			}
			var seen map[string]string
			json.Unmarshal(rec.Body.Bytes(), &seen)
			wantPath, wantQuery, _ := strings.Cut(strings.TrimPrefix(tc.path, "/console"), "?")
			if seen["path"] != wantPath || seen["query"] != wantQuery || seen["auth"] != "Bearer "+testKey+"a" ||
				seen["cookie"] != "" || seen["csrf"] != "" || seen["method"] != tc.method {
				t.Errorf("the API saw %v", seen)
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") ||
				rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("forwarded answer headers: %v", rec.Header())
			}
		})
	}
}

func TestPageHeaders(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newTestHandler(&now)
	for _, p := range []string{"/", "/console/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock.test"+p, nil))
		csp := rec.Header().Get("Content-Security-Policy")
		if rec.Code != 200 || csp != CSP || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: %d, headers %v", p, rec.Code, rec.Header())
		}
	}
	for _, want := range []string{"default-src 'self'", "script-src 'self';", "frame-ancestors 'none'", "object-src 'none'"} {
		if !strings.Contains(CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(CSP, "unsafe-eval") || strings.Contains(strings.SplitN(CSP, "style-src", 2)[0], "unsafe-inline") {
		t.Errorf("CSP allows script from strings: %s", CSP)
	}
	for _, p := range []string{"/console/assets/..%2fconsole.go", "/console/assets/.keep", "/console/nope"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://paddock.test"+p, nil))
		if rec.Code != 404 {
			t.Errorf("%s: %d; want 404", p, rec.Code)
		}
	}
}

func TestSignOut(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newTestHandler(&now)
	c, csrf := signIn(t, h, testKey+"a")
	do := func(method, path, token string) int {
		req := httptest.NewRequest(method, "http://paddock.test"+path, nil)
		req.AddCookie(c)
		if token != "" {
			req.Header.Set(CSRFHeader, token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := do("GET", "/console/session", ""); got != 200 {
		t.Fatalf("whoami: %d", got)
	}
	if got := do("DELETE", "/console/session", ""); got != 401 {
		t.Errorf("sign-out without CSRF: %d; want 401", got)
	}
	if got := do("DELETE", "/console/session", csrf); got != 204 {
		t.Errorf("sign-out: %d; want 204", got)
	}
	if got := do("GET", "/console/v1/sandboxes", ""); got != 401 {
		t.Errorf("after sign-out: %d; want 401", got)
	}
}
