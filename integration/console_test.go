package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"
)

// consoleClient signs in to the shared daemon's console with key i and
// returns an HTTP client holding the session cookie, and the CSRF token.
func consoleClient(t *testing.T, i int) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	req, _ := http.NewRequest("POST", shared.url+"/console/session", strings.NewReader(`{"key":"`+shared.keys[i]+`"}`))
	req.Header.Set("Origin", shared.url)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		CSRFToken string `json:"csrf_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || resp.StatusCode != 200 || info.CSRFToken == "" {
		t.Fatalf("sign-in: %d %v", resp.StatusCode, err)
	}
	return c, info.CSRFToken
}

// TestConsoleAPI: the console's cookie reaches the API through
// /console/v1 only, scoped to its key, with CSRF on state changes; the
// metrics history fills while the sandbox runs.
func TestConsoleAPI(t *testing.T) {
	requireDaemon(t)
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	alice, csrf := consoleClient(t, 0)
	bob, _ := consoleClient(t, 1)

	do := func(c *http.Client, method, path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, shared.url+path, strings.NewReader("{}"))
		if token != "" {
			req.Header.Set("X-Paddock-CSRF", token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name         string
		c            *http.Client
		method, path string
		token        string
		want         int
		contains     string
	}{
		{"list through the console", alice, "GET", "/console/v1/sandboxes", "", 200, sb.ID},
		{"another key's list", bob, "GET", "/console/v1/sandboxes", "", 200, `"sandboxes":[]`},
		{"another key's sandbox", bob, "GET", "/console/v1/sandboxes/" + sb.ID, "", 404, "not_found"},
		{"the API ignores the cookie", alice, "GET", "/v1/sandboxes", "", 401, "unauthorized"},
		{"state change without CSRF", alice, "POST", "/console/v1/sandboxes/" + sb.ID + "/pause", "", 401, "X-Paddock-CSRF"},
		{"state change with CSRF", alice, "POST", "/console/v1/sandboxes/" + sb.ID + "/pause", csrf, 200, `"paused"`},
		{"resume", alice, "POST", "/console/v1/sandboxes/" + sb.ID + "/resume", csrf, 200, `"running"`},
		{"the page", alice, "GET", "/", "", 200, "<!doctype html>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := do(tc.c, tc.method, tc.path, tc.token)
			if st != tc.want || !strings.Contains(strings.ToLower(body), strings.ToLower(tc.contains)) {
				t.Errorf("%s %s: %d %.300s; want %d containing %q", tc.method, tc.path, st, body, tc.want, tc.contains)
			}
		})
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := sb.MetricsHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Samples) >= 2 {
			if h.MaxSamples != 360 || h.SandboxID != sb.ID || h.Samples[1].CPUSeconds < h.Samples[0].CPUSeconds {
				t.Fatalf("history: %+v", h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history has %d samples after 30 s", len(h.Samples))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := shared.client(1).Sandbox(sb.ID).MetricsHistory(ctx); err == nil {
		t.Error("another key read the sandbox's metrics history")
	}
}
