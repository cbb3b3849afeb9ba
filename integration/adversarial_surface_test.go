package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// The "daemon surface" family of the adversarial suite (issue 16): the
// daemon's own HTTP surface under hostile clients. Attacks come from
// 127.0.0.2, the other tenant from 127.0.0.1, so per-address limits tell
// them apart as they would two hosts.

const attackerAddr = "127.0.0.2"

// startSurfaceDaemon starts a daemon of its own for one test (uid range
// crashUIDBase + slot*65536...) with args, stopped at the end.
func startSurfaceDaemon(t testing.TB, slot int, args ...string) *daemon {
	t.Helper()
	requireDaemon(t)
	d, err := startDaemon(daemonOptions{extraArgs: append([]string{"--uid-base", strconv.Itoa(crashUIDBase + slot*65536), "--max-sandboxes", "6"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	return d
}

// dialFrom connects to the daemon from the local address src.
func dialFrom(d *daemon, src string) (net.Conn, error) {
	dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return dl.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
}

// procFDs is the number of open descriptors of pid.
func procFDs(pid int) int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents)
}

// procStatusKiB reads a KiB field (VmRSS, VmHWM) of /proc/pid/status.
func procStatusKiB(pid int, field string) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// tenantWorks fails the test unless key 1 (bob) gets health, a create
// and an exec through on d (from 127.0.0.1).
func tenantWorks(t *testing.T, d *daemon, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: health: %v %v", what, resp, err)
	}
	resp.Body.Close()
	sb, err := d.client(1).Create(ctx, nil)
	if err != nil {
		t.Fatalf("%s: the other tenant's create: %v", what, err)
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, api.ExecRequest{Command: "echo ok", Stdin: strings.Repeat("x", 2<<20)})
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("%s: the other tenant's exec (2 MiB body): %+v %v", what, res, err)
	}
}

// TestAdversarialSurfaceConnections: 1,200 connections from one address
// that send headers announcing a body, then stall (finding 1). The
// address gets --max-conns-per-addr of them, the rest a 503; the other
// tenant's health, create and exec work; the daemon's descriptors stay
// under max-conns-per-addr + 200; the stalled ones are cut after
// --body-idle-timeout.
func TestAdversarialSurfaceConnections(t *testing.T) {
	d := startSurfaceDaemon(t, 700, "--max-conns", "400", "--max-conns-per-addr", "150",
		"--body-idle-timeout", "2s", "--read-header-timeout", "2s")
	fds0 := procFDs(d.cmd.Process.Pid)
	var mu sync.Mutex
	var conns []net.Conn
	refused := 0
	var wg sync.WaitGroup
	for i := range 1200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialFrom(d, attackerAddr)
			if err != nil {
				return
			}
			if i%2 == 0 { // headers and a stalled body
				fmt.Fprintf(c, "POST /v1/sandboxes/sbx/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 10000000\r\n\r\n{", d.keys[0])
			} else { // half the headers
				fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n")
			}
			c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			b := make([]byte, 512)
			n, _ := c.Read(b)
			c.SetReadDeadline(time.Time{})
			mu.Lock()
			defer mu.Unlock()
			if bytes.HasPrefix(b[:n], []byte("HTTP/1.1 503")) {
				if !bytes.Contains(b[:n], []byte(`"code":"unavailable"`)) {
					t.Errorf("503 without the JSON error: %q", b[:n])
				}
				refused++
				c.Close()
				return
			}
			conns = append(conns, c)
		}()
	}
	wg.Wait()
	held := len(conns)
	fds := procFDs(d.cmd.Process.Pid)
	t.Logf("attack: %d connections held, %d refused with 503; daemon fds %d -> %d", held, refused, fds0, fds)
	if refused == 0 {
		t.Fatal("no connection was refused past --max-conns-per-addr")
	}
	if fds > fds0+150+200 {
		t.Fatalf("daemon holds %d descriptors (%d before), want at most %d", fds, fds0, fds0+350)
	}
	tenantWorks(t, d, "during the connection attack")
	// Every held connection ends: the daemon cuts stalled headers and
	// bodies (no answer to read, or a 4xx, then EOF). The stalled bodies
	// of one key queue for its two upload slots (--big-bodies-per-key)
	// and each is cut after the 2 s --body-idle-timeout, so the last of
	// the daemon's 150 admitted connections can wait up to 75 s to be
	// cut: all are read at once, against one deadline that allows that.
	deadline := time.Now().Add(60*time.Second + time.Duration(min(held, 150))*time.Second)
	errs := make(chan error, len(conns))
	for _, c := range conns {
		go func() {
			defer c.Close()
			c.SetReadDeadline(deadline)
			_, err := io.Copy(io.Discard, c)
			errs <- err
		}()
	}
	for range conns {
		// A reset ends a connection too (a refusal past maxRefusing
		// closes without reading the request).
		if err := <-errs; err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a stalled connection was not cut: %v", err)
		}
	}
	tenantWorks(t, d, "after the connection attack")
}

// stalledExec opens an exec by key from the attacker's address that
// announces size bytes of body, sends sent bytes of it and stalls.
func stalledExec(t testing.TB, d *daemon, key, id string, size, sent int) net.Conn {
	t.Helper()
	c, err := dialFrom(d, attackerAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", id, key, size)
	c.Write(append([]byte(`{"command":"true","stdin":"`), bytes.Repeat([]byte("x"), sent)...))
	return c
}

// TestAdversarialSurfaceStalledBodies: key A stalls 8 multi-megabyte exec
// bodies (finding 2); key B's large execs go through meanwhile, A's
// stalled requests are answered 400 and closed after
// --body-idle-timeout, and a silent NDJSON stream of B outlives both
// idle timeouts.
func TestAdversarialSurfaceStalledBodies(t *testing.T) {
	d := startSurfaceDaemon(t, 710, "--body-idle-timeout", "2s", "--write-idle-timeout", "2s")
	sbA := newSandboxOn(t, d, 0, nil)
	var stalled []net.Conn
	for range 8 {
		stalled = append(stalled, stalledExec(t, d, d.keys[0], sbA.ID, 20<<20, 1<<20))
	}
	tenantWorks(t, d, "with 8 stalled exec bodies of another key")
	for _, c := range stalled {
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		raw, err := io.ReadAll(c)
		resp, err2 := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err2 != nil {
			t.Fatalf("stalled body: %v / %v after %q, want a 400 answer", err, err2, raw)
		}
		var e api.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 400 || !strings.Contains(e.Error.Message, "body-idle-timeout") {
			t.Fatalf("stalled body: %d %+v, want 400 naming --body-idle-timeout", resp.StatusCode, e)
		}
		c.Close()
	}
	// A stream that is silent for longer than both idle timeouts is not
	// cut: deadlines are per read and per write, never per request.
	sbB := newSandboxOn(t, d, 1, nil)
	body := `{"command":"sleep 5; echo done","timeout_seconds":30}`
	req, _ := http.NewRequestWithContext(ctxT(t), "POST", d.url+"/v1/sandboxes/"+sbB.ID+"/exec", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+d.keys[1])
	req.Header.Set("Accept", api.ContentTypeNDJSON)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	// "ZG9uZQo=" is "done\n" in base64.
	if err != nil || !bytes.Contains(out, []byte(`"data":"ZG9uZQo="`)) || !bytes.Contains(out, []byte(`"exit_code":0`)) {
		t.Fatalf("silent stream: %q %v", out, err)
	}
}

// headerServer answers every request with about 1 MiB of headers.
const headerServer = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        for i in range(1024):
            self.send_header("X-Big-%d" % i, "v" * 1000)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// TestAdversarialSurfacePortHeaders: 40 concurrent requests through the
// port proxy to a server answering 1 MiB of headers (finding 3) get 502
// unavailable; the daemon's peak RSS grows by less than 64 MiB (it was
// +410 MiB).
func TestAdversarialSurfacePortHeaders(t *testing.T) {
	d := startSurfaceDaemon(t, 720)
	sb := newSandboxOn(t, d, 0, nil)
	ctx := ctxT(t)
	if _, err := sb.Files().Write(ctx, "h.py", []byte(headerServer), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Command: "python3 h.py"}); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("%s/v1/sandboxes/%s/ports/8000/", d.url, sb.ID)
	get := func() (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+d.keys[0])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if st, body := get(); st == 502 && strings.Contains(body, "headers exceeded") || time.Now().After(deadline) {
			break
		}
	}
	hwm0 := procStatusKiB(d.cmd.Process.Pid, "VmHWM")
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := []string{}
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := get()
			if st != 502 || !strings.Contains(body, `"unavailable"`) {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%d %.200s", st, body))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	hwm := procStatusKiB(d.cmd.Process.Pid, "VmHWM")
	t.Logf("40 requests with 1 MiB of headers: peak RSS %d -> %d KiB", hwm0, hwm)
	if len(bad) > 0 {
		t.Fatalf("%d answers not 502 unavailable, e.g. %s", len(bad), bad[0])
	}
	if hwm-hwm0 > 64<<10 {
		t.Fatalf("peak RSS grew by %d KiB, want under 64 MiB", hwm-hwm0)
	}
	tenantWorks(t, d, "after the header attack")
}

// TestAdversarialSurfaceTemplateBodies: 8 concurrent 90 MiB JSON template
// bodies from one key (finding 4) are decoded one at a time: each gets
// its documented answer (400 for the bad name they carry), the other
// tenant's exec works meanwhile, and the daemon's peak RSS stays under
// 900 MiB (it was 1.9 GiB).
func TestAdversarialSurfaceTemplateBodies(t *testing.T) {
	d := startSurfaceDaemon(t, 730)
	blob := bytes.Repeat([]byte("A"), 90<<20)
	body := append(append([]byte(`{"name":"bad name!","recipe":{"from":"base","steps":[{"run":"true"}]},"context":{"f":"`), blob...), `"}}`...)
	hwm0 := procStatusKiB(d.cmd.Process.Pid, "VmHWM")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctxT(t), "POST", d.url+"/v1/templates", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+d.keys[0])
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !bytes.Contains(b, []byte("bad_request")) {
				errs <- fmt.Sprintf("%d %.200s", resp.StatusCode, b)
			}
		}()
	}
	tenantWorks(t, d, "during 8 template bodies of 90 MiB")
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("template body: %s, want 400 bad_request", e)
	}
	hwm := procStatusKiB(d.cmd.Process.Pid, "VmHWM")
	t.Logf("8 x 90 MiB template bodies: peak RSS %d -> %d KiB", hwm0, hwm)
	if hwm > 900<<10 {
		t.Fatalf("peak RSS %d KiB, want under 900 MiB", hwm)
	}
}
