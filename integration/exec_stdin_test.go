package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// execRaw posts body to a sandbox's exec with hdr and returns the answer.
func execRaw(t *testing.T, sid string, body io.Reader, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), "POST", shared.url+"/v1/sandboxes/"+sid+"/exec", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+shared.keys[0])
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestExecStdinLarge runs large stdins through every path: the Go client
// (stdin last, streamed), a plain JSON body (decoded whole, then raw to
// the agent), binary through stdin_base64; and commands that read none of
// it, end early or never end.
func TestExecStdinLarge(t *testing.T) {
	sb := newSandbox(t, nil)
	ctx := ctxT(t)
	mib := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	full := bytes.Repeat(mib, 16)
	binary := make([]byte, 1<<20)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	cases := []struct {
		name    string
		req     api.ExecRequest
		stdout  string
		timeout bool
	}{
		{"1 MiB", api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(mib)}, "1048576\n", false},
		{"16 MiB", api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(full)}, "16777216\n", false},
		{"1 MiB binary", api.ExecRequest{Command: "sha256sum | cut -c1-8", StdinBase64: base64.StdEncoding.EncodeToString(binary)},
			fmt.Sprintf("%x\n", sha256Sum(binary))[:8] + "\n", false},
		{"reads none", api.ExecRequest{Command: "echo ok", Stdin: string(full)}, "ok\n", false},
		{"ends early", api.ExecRequest{Command: "head -c 4", Stdin: string(full)}, "0123", false},
		{"never reads, times out", api.ExecRequest{Argv: []string{"sleep", "60"}, Stdin: string(full), TimeoutSeconds: 1}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			res, err := sb.Exec(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != c.stdout || res.TimedOut != c.timeout {
				t.Fatalf("stdout %q timed_out %v, want %q %v", res.Stdout, res.TimedOut, c.stdout, c.timeout)
			}
			t.Logf("%v", time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("16 MiB, NDJSON answer", func(t *testing.T) {
		var out []byte
		for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(full)}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev.Data...)
		}
		if string(out) != "16777216\n" {
			t.Fatalf("stdout %q", out)
		}
	})
	t.Run("plain JSON body", func(t *testing.T) {
		b, _ := json.Marshal(api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(mib), TimeoutSeconds: 30})
		resp := execRaw(t, sb.ID, bytes.NewReader(b), nil)
		var res api.ExecResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 || res.Stdout != "1048576\n" {
			t.Fatalf("%d %+v %v", resp.StatusCode, res, err)
		}
	})
}

func sha256Sum(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}

// TestExecStdinStreams checks that with Paddock-Stdin-Last the command
// reads its stdin while the client is still sending it: it answers the
// first line before the second one is sent.
func TestExecStdinStreams(t *testing.T) {
	sb := newSandbox(t, nil)
	pr, pw := io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, `{"command":"read a; echo \"got $a\"; read b; echo \"then $b\"","stdin":"one\n`)
	resp := execRaw(t, sb.ID, pr, map[string]string{"Paddock-Stdin-Last": "true", "Accept": api.ContentTypeNDJSON})
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	var out strings.Builder
	for sc.Scan() {
		var ev api.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		out.Write(ev.Data)
		if out.String() == "got one\n" {
			go func() { io.WriteString(pw, `two\n"}`); pw.Close() }()
		}
		if ev.Type == api.EventExit || ev.Type == api.EventError {
			break
		}
	}
	if out.String() != "got one\nthen two\n" {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestExecStdinBad checks that a streamed stdin found invalid or too large
// part-way is the request's error and kills the command, which never sees
// an end of its input.
func TestExecStdinBad(t *testing.T) {
	sb := newSandbox(t, nil)
	ctx := ctxT(t)
	mib := strings.Repeat("QUFB", 1<<18) // 1 MiB of base64
	cases := []struct {
		name, body string
		status     int
	}{
		{"bad base64 part-way", mib + "!!!!", 400},
		{"over 16 MiB", strings.Repeat(mib, 23), 413}, // 17.25 MiB decoded
		{"not the last member", mib + `","cwd":"/`, 400},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			marker := fmt.Sprintf("/workspace/finished-%d", i)
			body := `{"command":"cat >/dev/null; touch ` + marker + `","stdin_base64":"` + c.body + `"}`
			resp := execRaw(t, sb.ID, strings.NewReader(body), map[string]string{"Paddock-Stdin-Last": "true"})
			var e api.ErrorResponse
			_ = json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != c.status {
				t.Fatalf("%d %+v, want %d", resp.StatusCode, e, c.status)
			}
			time.Sleep(300 * time.Millisecond)
			res, err := sb.Exec(ctx, api.ExecRequest{Command: "ls " + marker + " 2>&1 || true"})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Stdout, "No such file") {
				t.Fatalf("the command ran on past its bad stdin: %q", res.Stdout)
			}
		})
	}
}
