package cluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestE2BThroughGateway speaks the E2B SDK's wire format (REST control
// plane, Connect JSON process stream, /files) to a gateway's E2B endpoint
// in front of three nodes: a create placed on a node and recorded, a
// command, a file written and read back, the list, another key's 404 and
// the kill.
func TestE2BThroughGateway(t *testing.T) {
	l := newLab(t)
	l.e2b = true
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gw := l.gwE2B[0]
	do := func(method, path string, hdr map[string]string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, gw+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	alice := map[string]string{"X-API-KEY": l.keys[0], "Content-Type": "application/json"}

	st, b := do("POST", "/v2/sandboxes", alice, []byte(`{"templateID": "base", "timeout": 300}`))
	if st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, b)
	}
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if err := json.Unmarshal(b, &sb); err != nil || sb.SandboxID == "" || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %s: %v", b, err)
	}
	t.Logf("E2B sandbox %s on %s", sb.SandboxID, l.nodeOf(ctx, sb.SandboxID))

	envd := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983",
		"X-Access-Token": sb.EnvdAccessToken, "Content-Type": "application/connect+json"}
	start := []byte(`{"process":{"cmd":"/bin/sh","args":["-c","echo hi; exit 3"]}}`)
	frame := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(start)))
	st, b = do("POST", "/process.Process/Start", envd, append(frame, start...))
	if st != http.StatusOK {
		t.Fatalf("process start: %d %s", st, b)
	}
	out, exit := "", any(nil)
	for len(b) >= 5 {
		n := binary.BigEndian.Uint32(b[1:5])
		var m struct {
			Event struct {
				Data *struct{ Stdout string } `json:"data"`
				End  *struct {
					ExitCode any `json:"exitCode"`
				} `json:"end"`
			} `json:"event"`
		}
		json.Unmarshal(b[5:5+n], &m)
		if d := m.Event.Data; d != nil {
			o, _ := base64.StdEncoding.DecodeString(d.Stdout)
			out += string(o)
		}
		if e := m.Event.End; e != nil {
			exit = e.ExitCode
		}
		b = b[5+n:]
	}
	if out != "hi\n" || exit != float64(3) {
		t.Fatalf("command through the gateway: output %q exit %v", out, exit)
	}

	files := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken,
		"Content-Type": "application/octet-stream"}
	if st, b := do("POST", "/files?path=/tmp/e2b.txt", files, []byte("through the gateway")); st != http.StatusOK {
		t.Fatalf("upload: %d %s", st, b)
	}
	if st, b := do("GET", "/files?path=/tmp/e2b.txt", files, nil); st != http.StatusOK || string(b) != "through the gateway" {
		t.Fatalf("download: %d %q", st, b)
	}
	files["X-Access-Token"] = "pdk_envd_forged"
	if st, _ := do("GET", "/files?path=/tmp/e2b.txt", files, nil); st != http.StatusUnauthorized {
		t.Fatalf("download with a forged token: %d, want 401", st)
	}

	if st, b := do("GET", "/v2/sandboxes", alice, nil); st != http.StatusOK || !strings.Contains(string(b), sb.SandboxID) {
		t.Fatalf("list: %d %s", st, b)
	}
	bob := map[string]string{"X-API-KEY": l.keys[1]}
	if st, b := do("GET", "/sandboxes/"+sb.SandboxID, bob, nil); st != http.StatusNotFound {
		t.Fatalf("bob's get: %d %s, want 404", st, b)
	}
	if st, b := do("GET", "/v2/sandboxes", bob, nil); st != http.StatusOK || strings.Contains(string(b), sb.SandboxID) {
		t.Fatalf("bob's list: %d %s", st, b)
	}
	if st, b := do("DELETE", "/sandboxes/"+sb.SandboxID, alice, nil); st != http.StatusNoContent {
		t.Fatalf("kill: %d %s", st, b)
	}
	if st, _ := do("GET", "/sandboxes/"+sb.SandboxID, alice, nil); st != http.StatusNotFound {
		t.Fatalf("get after kill: %d, want 404", st)
	}
}
