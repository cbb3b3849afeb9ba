package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/backend/fake"
)

// TestErrorMapping: each error class reaches the client as its status and
// code, in the one error body.
func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		code   string
		call   func(ts *testServer) response
	}{
		{"invalid", 400, api.CodeBadRequest, func(ts *testServer) response {
			return ts.do("POST", "/v1/sandboxes", ts.alice, `{"timeout_seconds": -1}`)
		}},
		{"bad JSON", 400, api.CodeBadRequest, func(ts *testServer) response {
			return ts.do("POST", "/v1/sandboxes", ts.alice, `{"template": `)
		}},
		{"unknown field", 400, api.CodeBadRequest, func(ts *testServer) response {
			return ts.do("POST", "/v1/sandboxes", ts.alice, `{"no_such_field": 1}`)
		}},
		{"not found", 404, api.CodeNotFound, func(ts *testServer) response {
			return ts.do("GET", "/v1/sandboxes/sbnosuchsandbox", ts.alice, nil)
		}},
		{"no route", 404, api.CodeNotFound, func(ts *testServer) response {
			return ts.do("GET", "/v1/no/such/route", ts.alice, nil)
		}},
		{"conflict", 409, api.CodeConflict, func(ts *testServer) response {
			sb := ts.create(ts.alice)
			return ts.do("POST", "/v1/sandboxes/"+sb.ID+"/resume", ts.alice, nil) // running, not paused
		}},
		{"conflict: exec in a paused sandbox", 409, api.CodeConflict, func(ts *testServer) response {
			sb := ts.create(ts.alice)
			ts.json("POST", "/v1/sandboxes/"+sb.ID+"/pause", ts.alice, nil, http.StatusOK, nil)
			return ts.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ts.alice, api.ExecRequest{Argv: []string{"true"}})
		}},
		{"too large", 413, api.CodeTooLarge, func(ts *testServer) response {
			sb := ts.create(ts.alice)
			return ts.do("PUT", "/v1/sandboxes/"+sb.ID+"/files?path=big", ts.alice, make([]byte, testMaxFileBytes+1))
		}},
		{"unknown template", 422, api.CodeUnknownTemplate, func(ts *testServer) response {
			return ts.do("POST", "/v1/sandboxes", ts.alice, api.CreateSandboxRequest{Template: "no-such-template"})
		}},
		{"per-key limit", 429, api.CodeLimitExceeded, func(ts *testServer) response {
			for range testMaxPerKey {
				ts.create(ts.alice)
			}
			return ts.do("POST", "/v1/sandboxes", ts.alice, nil)
		}},
		{"no capacity", 503, api.CodeNoCapacity, func(ts *testServer) response {
			for i := range testMaxSandboxes {
				ts.create([]string{ts.alice, ts.bob}[i%2])
			}
			return ts.do("POST", "/v1/sandboxes", ts.bob, nil)
		}},
		{"agent unavailable", 502, api.CodeUnavailable, func(ts *testServer) response {
			sb := ts.create(ts.alice)
			if err := ts.backend.Host().SetUnreachable(sb.ID, true); err != nil {
				ts.t.Fatal(err)
			}
			return ts.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ts.alice, api.ExecRequest{Argv: []string{"true"}})
		}},
		{"not supported", 501, api.CodeNotSupported, func(ts *testServer) response {
			return ts.do("POST", "/v1/sandboxes", ts.alice, api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: api.NetworkFull}})
		}},
		{"internal", 500, api.CodeInternal, func(ts *testServer) response {
			ts.backend.Fail(fake.OpCreate, errors.New("disk on fire"))
			return ts.do("POST", "/v1/sandboxes", ts.alice, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t)
			r := tc.call(ts)
			if r.status != tc.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tc.status)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
			e := r.errBody(t)
			if e.Code != tc.code || e.Message == "" {
				t.Errorf("error %+v, want code %s and a message", e, tc.code)
			}
			if tc.status == 500 && !strings.HasPrefix(e.Message, "internal error") {
				t.Errorf("500 message %q, want it to say internal error", e.Message)
			}
		})
	}
}

// TestCreateFailureLeavesNothing: a backend failure ends the record as
// terminated and frees its admission slot.
func TestCreateFailureLeavesNothing(t *testing.T) {
	ts := newTestServer(t)
	ts.backend.Fail(fake.OpCreate, errors.New("boom"))
	for range testMaxPerKey + 1 {
		if r := ts.do("POST", "/v1/sandboxes", ts.alice, nil); r.status != 500 {
			t.Fatalf("create with a failing backend: %d %s", r.status, r.body)
		}
	}
	if ids := ts.backend.Host().IDs(); len(ids) != 0 {
		t.Errorf("host has %v after failed creates", ids)
	}
	ts.backend.Fail(fake.OpCreate, nil)
	ts.create(ts.alice) // the failed ones hold no slot
	var list api.ListSandboxesResponse
	ts.json("GET", "/v1/sandboxes?state=terminated", ts.alice, nil, http.StatusOK, &list)
	if len(list.Sandboxes) != testMaxPerKey+1 {
		t.Errorf("%d terminated records, want %d", len(list.Sandboxes), testMaxPerKey+1)
	}
	for _, sb := range list.Sandboxes {
		if !strings.HasPrefix(sb.Reason, "failed") {
			t.Errorf("reason %q, want failed: ...", sb.Reason)
		}
	}
}

// TestLimits: bodies and headers past their bounds are refused before
// they are read whole.
func TestLimits(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	t.Run("JSON body", func(t *testing.T) {
		body := `{"metadata": {"k": "` + strings.Repeat("x", 1<<20) + `"}}`
		r := ts.do("POST", "/v1/sandboxes", ts.alice, body)
		if r.status != http.StatusRequestEntityTooLarge || r.errBody(t).Code != api.CodeTooLarge {
			t.Errorf("%d %s, want 413 too_large", r.status, r.body)
		}
	})
	t.Run("exec body by Content-Length", func(t *testing.T) {
		// Announce 32 MiB and send nothing: the answer must not wait for it.
		st, body := rawRequest(t, ts.url, "POST /v1/sandboxes/"+sb.ID+"/exec HTTP/1.1\r\n"+
			"Host: x\r\nAuthorization: Bearer "+ts.alice+"\r\nContent-Type: application/json\r\n"+
			"Content-Length: 33554432\r\n\r\n")
		if st != http.StatusRequestEntityTooLarge || !strings.Contains(body, api.CodeTooLarge) {
			t.Errorf("%d %s, want 413 too_large", st, body)
		}
	})
	t.Run("exec stdin", func(t *testing.T) {
		r := ts.do("POST", "/v1/sandboxes/"+sb.ID+"/exec", ts.alice,
			api.ExecRequest{Argv: []string{"cat"}, Stdin: strings.Repeat("x", 16<<20+1)})
		if r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%d %s, want 413", r.status, r.body)
		}
	})
	t.Run("header", func(t *testing.T) {
		st, _ := rawRequest(t, ts.url, "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"+
			"Authorization: Bearer "+ts.alice+"\r\nX-Big: "+strings.Repeat("x", 128<<10)+"\r\n\r\n")
		if st != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", st)
		}
	})
}

// rawRequest writes raw to the server and reads the status and body of
// the answer.
func rawRequest(t *testing.T, url, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := fmt.Fprint(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	r := readResponse(t, resp)
	return r.status, string(r.body)
}
