package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// TestAuth: without a known key every authenticated route answers 401
// with the error body and a Bearer challenge; health needs no key.
func TestAuth(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	routes := []string{
		"GET /v1/sandboxes",
		"POST /v1/sandboxes",
		"GET /v1/sandboxes/{id}",
		"DELETE /v1/sandboxes/{id}",
		"POST /v1/sandboxes/{id}/exec",
		"PUT /v1/sandboxes/{id}/files?path=a",
		"GET /v1/usage",
		"GET /v1/secrets",
		"GET /v1/templates",
	}
	for _, auth := range []struct{ name, header string }{
		{"missing", ""},
		{"unknown", "Bearer pk_not_a_key"},
		{"not bearer", "Basic " + ts.alice},
		{"empty bearer", "Bearer "},
	} {
		for _, route := range routes {
			method, path, _ := strings.Cut(strings.ReplaceAll(route, "{id}", sb.ID), " ")
			t.Run(auth.name+"/"+route, func(t *testing.T) {
				req, _ := http.NewRequest(method, ts.url+path, strings.NewReader("{}"))
				if auth.header != "" {
					req.Header.Set("Authorization", auth.header)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				r := readResponse(t, resp)
				if r.status != http.StatusUnauthorized {
					t.Fatalf("status %d %s, want 401", r.status, r.body)
				}
				if e := r.errBody(t); e.Code != api.CodeUnauthorized || e.Message == "" {
					t.Errorf("error body %+v, want code unauthorized and a message", e)
				}
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", r.header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	// The sandbox is untouched by all of that.
	var got api.Sandbox
	ts.json(http.MethodGet, "/v1/sandboxes/"+sb.ID, ts.alice, nil, http.StatusOK, &got)
	if got.State != "running" {
		t.Errorf("sandbox is %s after unauthenticated calls", got.State)
	}
	var h api.Health
	ts.json(http.MethodGet, "/v1/health", "", nil, http.StatusOK, &h)
	if h.Status != "ok" {
		t.Errorf("health %+v", h)
	}
}

// TestTenantIsolation: another key's sandbox is not found on every
// sandbox route, and stays as it was.
func TestTenantIsolation(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	routes := []struct {
		route string
		body  any
	}{
		{"GET /v1/sandboxes/{id}", nil},
		{"DELETE /v1/sandboxes/{id}", nil},
		{"POST /v1/sandboxes/{id}/timeout", api.SetTimeoutRequest{TimeoutSeconds: 60}},
		{"POST /v1/sandboxes/{id}/pause", nil},
		{"POST /v1/sandboxes/{id}/resume", nil},
		{"GET /v1/sandboxes/{id}/metrics", nil},
		{"PATCH /v1/sandboxes/{id}/network", api.NetworkPolicy{Mode: api.NetworkOff}},
		{"GET /v1/sandboxes/{id}/ports", nil},
		{"GET /v1/sandboxes/{id}/ports/8080/", nil},
		{"POST /v1/sandboxes/{id}/exec", api.ExecRequest{Argv: []string{"true"}}},
		{"POST /v1/sandboxes/{id}/processes", api.ExecRequest{Argv: []string{"true"}}},
		{"GET /v1/sandboxes/{id}/processes", nil},
		{"GET /v1/sandboxes/{id}/processes/p1", nil},
		{"POST /v1/sandboxes/{id}/processes/p1/wait", nil},
		{"GET /v1/sandboxes/{id}/processes/p1/output", nil},
		{"POST /v1/sandboxes/{id}/processes/p1/stdin", "x"},
		{"POST /v1/sandboxes/{id}/processes/p1/kill", map[string]string{"signal": "SIGKILL"}},
		{"PUT /v1/sandboxes/{id}/files?path=a.txt", "data"},
		{"GET /v1/sandboxes/{id}/files?path=a.txt", nil},
		{"DELETE /v1/sandboxes/{id}/files?path=a.txt", nil},
		{"GET /v1/sandboxes/{id}/files/list?path=.", nil},
		{"GET /v1/sandboxes/{id}/files/stat?path=a.txt", nil},
		{"POST /v1/sandboxes/{id}/files/mkdir?path=d", nil},
		// Not here: POST .../checkpoint (being removed) and .../snapshot
		// (answers 501 first: templates are off in this server).
	}
	for _, rt := range routes {
		t.Run(rt.route, func(t *testing.T) {
			method, path, _ := strings.Cut(strings.ReplaceAll(rt.route, "{id}", sb.ID), " ")
			r := ts.do(method, path, ts.bob, rt.body)
			if r.status != http.StatusNotFound {
				t.Fatalf("bob: %d %s, want 404", r.status, r.body)
			}
			if e := r.errBody(t); e.Code != api.CodeNotFound {
				t.Errorf("bob: code %q, want not_found", e.Code)
			}
		})
	}
	var list api.ListSandboxesResponse
	ts.json(http.MethodGet, "/v1/sandboxes?state=all", ts.bob, nil, http.StatusOK, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("bob lists %d sandboxes, want none", len(list.Sandboxes))
	}
	var got api.Sandbox
	ts.json(http.MethodGet, "/v1/sandboxes/"+sb.ID, ts.alice, nil, http.StatusOK, &got)
	if got.State != "running" || !got.ExpiresAt.Equal(sb.ExpiresAt) {
		t.Errorf("alice's sandbox changed under bob's calls: %s, expires %v (was %v)", got.State, got.ExpiresAt, sb.ExpiresAt)
	}
	if res := ts.exec(ts.alice, sb.ID, api.ExecRequest{Argv: []string{"true"}}); res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("alice's exec after bob's calls: %+v", res)
	}
}
