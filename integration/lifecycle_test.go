package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

func TestTenantIsolation(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	bob := shared.client(1)
	if _, err := bob.Get(ctx, sb.ID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("bob get alice's sandbox: %v, want not found", err)
	}
	bsb := bob.Sandbox(sb.ID)
	if _, err := bsb.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("bob exec: %v", err)
	}
	if _, err := bsb.Files().Read(ctx, "/etc/passwd"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("bob read: %v", err)
	}
	if err := bsb.Kill(ctx); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("bob delete: %v", err)
	}
	for sb2, err := range bob.All(ctx, client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if sb2.ID == sb.ID {
			t.Fatal("bob lists alice's sandbox")
		}
	}
	anon := client.New(shared.url, "pdk_notakey")
	if _, err := anon.Get(ctx, sb.ID); !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("bad key: %v", err)
	}
	// Another sandbox of the same key cannot see the first one's files.
	other := newSandbox(t, nil)
	sb.Files().Write(ctx, "secret.txt", []byte("s3cret"), 0)
	res, err := other.Exec(ctx, api.ExecRequest{Command: "grep -rs s3cret / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr -l | head -3; echo done"})
	if err != nil || res.Stdout != "done\n" {
		t.Fatalf("other sandbox found the file: %q %v", res.Stdout, err)
	}
}

func TestLifecycle(t *testing.T) {
	ctx := ctxT(t)
	c := shared.client(0)
	tag := time.Now().Format("150405.000000")
	var ids []string
	for i := 0; i < 3; i++ {
		sb := newSandbox(t, &api.CreateSandboxRequest{Metadata: map[string]string{"run": tag, "i": string(rune('a' + i))}, TimeoutSeconds: 120})
		ids = append(ids, sb.ID)
		if d := time.Until(sb.ExpiresAt); d < 100*time.Second || d > 121*time.Second {
			t.Fatalf("expires in %v, want ~120s", d)
		}
	}
	t.Run("list filters and pages", func(t *testing.T) {
		var got []string
		page, err := c.List(ctx, client.ListOptions{Metadata: map[string]string{"run": tag}, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sandboxes {
			got = append(got, s.ID)
		}
		if len(got) != 2 || page.NextCursor == "" {
			t.Fatalf("page 1: %v next %q", got, page.NextCursor)
		}
		page, err = c.List(ctx, client.ListOptions{Metadata: map[string]string{"run": tag}, Limit: 2, Cursor: page.NextCursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Sandboxes {
			got = append(got, s.ID)
		}
		if strings.Join(got, ",") != strings.Join(ids, ",") || page.NextCursor != "" {
			t.Fatalf("pages: %v, want %v (next %q)", got, ids, page.NextCursor)
		}
		one, err := c.List(ctx, client.ListOptions{Metadata: map[string]string{"run": tag, "i": "b"}})
		if err != nil || len(one.Sandboxes) != 1 || one.Sandboxes[0].ID != ids[1] {
			t.Fatalf("metadata filter: %+v %v", one, err)
		}
	})
	t.Run("set timeout", func(t *testing.T) {
		sb := c.Sandbox(ids[0])
		if err := sb.SetTimeout(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Until(sb.ExpiresAt); d > 31*time.Second || d < 20*time.Second {
			t.Fatalf("expires in %v after SetTimeout(30s)", d)
		}
	})
	t.Run("delete", func(t *testing.T) {
		sb := c.Sandbox(ids[2])
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, ids[2])
		if err != nil || got.State != api.StateTerminated || got.Reason != "deleted" {
			t.Fatalf("after delete: %+v %v", got, err)
		}
		if _, err := got.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("exec on terminated: %v, want conflict", err)
		}
		if err := sb.Close(); err != nil {
			t.Fatalf("close after kill: %v", err)
		}
	})
}

func TestLeaseExpiryReaps(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{TimeoutSeconds: 2})
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "sleep 30 &"}); err != nil {
		t.Fatal(err)
	}
	deadline := sb.ExpiresAt.Add(5 * time.Second)
	for time.Now().Before(deadline) {
		got, err := shared.client(0).Get(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == api.StateTerminated {
			if got.Reason != "expired" || got.EndedAt.Sub(sb.ExpiresAt) > 3*time.Second {
				t.Fatalf("ended %v after expiry, reason %q", got.EndedAt.Sub(sb.ExpiresAt), got.Reason)
			}
			if dirs := cgroupDirsOf(sb.ID); len(dirs) > 0 {
				t.Fatalf("cgroups left: %v", dirs)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("sandbox outlived its lease by 5s")
}

// TestBadInput checks that wrong requests get clear errors with the right
// status, never a hang or a stack trace.
func TestBadInput(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	key := shared.keys[0]
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown template", "POST", "/v1/sandboxes", `{"template":"nope"}`, 422, api.CodeUnknownTemplate},
		{"bad json", "POST", "/v1/sandboxes", `{"template":`, 400, api.CodeBadRequest},
		{"unknown field", "POST", "/v1/sandboxes", `{"templat":"base"}`, 400, api.CodeBadRequest},
		{"memory too big", "POST", "/v1/sandboxes", `{"resources":{"memory_mib":99999999}}`, 400, api.CodeBadRequest},
		{"negative timeout", "POST", "/v1/sandboxes", `{"timeout_seconds":-1}`, 400, api.CodeBadRequest},
		{"no such sandbox", "GET", "/v1/sandboxes/sbnope", ``, 404, api.CodeNotFound},
		{"exec neither", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{}`, 400, api.CodeBadRequest},
		{"exec both", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"argv":["ls"],"command":"ls"}`, 400, api.CodeBadRequest},
		{"exec NUL", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"argv":["ls","a\u0000b"]}`, 400, api.CodeBadRequest},
		{"exec huge cap", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"argv":["ls"],"max_output_bytes":999999999}`, 400, api.CodeBadRequest},
		{"exec missing binary", "POST", "/v1/sandboxes/" + sb.ID + "/exec", `{"argv":["no-such-binary"]}`, 400, api.CodeBadRequest},
		{"path NUL", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=a%00b", ``, 400, api.CodeBadRequest},
		{"read dir", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=/workspace", ``, 400, api.CodeBadRequest},
		{"read missing", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=nope.txt", ``, 404, api.CodeNotFound},
		{"read device", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=/dev/zero", ``, 400, api.CodeBadRequest},
		{"no route", "GET", "/v1/nothing", ``, 404, api.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(ctx, c.method, shared.url+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.ErrorResponse
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status || json.Unmarshal(b, &e) != nil || e.Error.Code != c.code || e.Error.Message == "" {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, b, c.status, c.code)
			}
		})
	}
	t.Run("oversized bodies", func(t *testing.T) {
		big := append(append([]byte(`{"command":"`), bytes.Repeat([]byte("a"), 30<<20)...), `"}`...)
		req, _ := http.NewRequestWithContext(ctx, "POST", shared.url+"/v1/sandboxes/"+sb.ID+"/exec", bytes.NewReader(big))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("30 MiB exec body: %d, want 413", resp.StatusCode)
		}
		req, _ = http.NewRequestWithContext(ctx, "GET", shared.url+"/v1/health", nil)
		req.Header.Set("X-Big", strings.Repeat("h", 200<<10))
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 431 {
			t.Fatalf("200 KiB header: %d, want 431", resp.StatusCode)
		}
	})
	t.Run("openapi served", func(t *testing.T) {
		resp, err := http.Get(shared.url + "/v1/openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(b, []byte("/v1/sandboxes/{id}/exec")) {
			t.Fatalf("openapi: %d %d bytes", resp.StatusCode, len(b))
		}
	})
}
