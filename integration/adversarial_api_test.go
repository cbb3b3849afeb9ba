package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// advRSSSampler records the shared daemon's peak RSS until stopped.
type advRSSSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func advSampleRSS() *advRSSSampler {
	s := &advRSSSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.peak.Store(advDaemonRSS())
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if r := advDaemonRSS(); r > s.peak.Load() {
				s.peak.Store(r)
			}
		}
	}()
	return s
}

func (s *advRSSSampler) Stop() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// advStreamHuge sends a request whose body is prefix followed by filler up to
// total bytes (announced with Content-Length, or chunked when chunked is
// set) over a raw connection, and reads the answer while still sending.
// It returns the status, the body and how many bytes had been sent when
// the answer arrived.
func advStreamHuge(t *testing.T, method, path string, prefix []byte, total int64, chunked bool) (int, []byte, int64) {
	t.Helper()
	conn, err := net.Dial("tcp", shared.opts.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(90 * time.Second))
	hdr := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n",
		method, path, shared.opts.listen, shared.keys[0])
	if chunked {
		hdr += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		hdr += fmt.Sprintf("Content-Length: %d\r\n\r\n", total)
	}
	var sent atomic.Int64
	go func() {
		if _, err := io.WriteString(conn, hdr); err != nil {
			return
		}
		filler := bytes.Repeat([]byte("a"), 256<<10)
		first := true
		for sent.Load() < total {
			chunk := filler
			if first {
				chunk, first = append(append([]byte(nil), prefix...), filler[len(prefix):]...), false
			}
			chunk = chunk[:min(int64(len(chunk)), total-sent.Load())]
			var err error
			if chunked {
				_, err = fmt.Fprintf(conn, "%x\r\n%s\r\n", len(chunk), chunk)
			} else {
				_, err = conn.Write(chunk)
			}
			if err != nil {
				return
			}
			sent.Add(int64(len(chunk)))
		}
		if chunked {
			io.WriteString(conn, "0\r\n\r\n")
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s with a %d-byte body: no answer after %d bytes: %v", method, path, total, sent.Load(), err)
	}
	at := sent.Load()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, b, at
}

// advRaw sends one request over its own connection, writing the body while
// it reads the answer: a server that answers early and closes (an error in
// the first bytes of a large body) is not mistaken for a failed request.
func advRaw(t *testing.T, method, path string, hdr map[string]string, body []byte) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", shared.opts.listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, shared.opts.listen)
	if _, ok := hdr["Authorization"]; !ok {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", shared.keys[0])
	}
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	go func() {
		if _, err := io.WriteString(conn, b.String()); err == nil {
			conn.Write(body)
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %.100s: no answer: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, out
}

// TestAdversarialAPIInputs sends huge and malformed requests: each gets a
// 4xx JSON error (never a 5xx or a hang) and the daemon keeps answering
// with bounded memory.
func TestAdversarialAPIInputs(t *testing.T) {
	sb := newSandbox(t, nil)
	sid := "/v1/sandboxes/" + sb.ID
	rss0 := advDaemonRSS()
	sampler := advSampleRSS()
	var notes []string
	var seqPeak int64

	worst := advProbe(t, func() {
		t.Run("huge bodies", func(t *testing.T) {
			const gib = 1 << 30
			cases := []struct {
				name, method, path string
				prefix             string
				chunked            bool
				maxRead            int64 // what the daemon may legitimately read
			}{
				{"create, content-length 1 GiB", "POST", "/v1/sandboxes", `{"metadata":{"a":"`, false, 1 << 20},
				{"create, chunked 1 GiB", "POST", "/v1/sandboxes", `{"metadata":{"a":"`, true, 1 << 20},
				{"exec, content-length 1 GiB", "POST", sid + "/exec", `{"argv":["true"],"stdin":"`, false, 24 << 20},
				{"exec, chunked 1 GiB", "POST", sid + "/exec", `{"argv":["true"],"stdin":"`, true, 24 << 20},
				{"timeout, chunked 1 GiB", "POST", sid + "/timeout", `{"timeout_seconds":"`, true, 1 << 20},
				{"files PUT, content-length 1 GiB", "PUT", sid + "/files?path=big.bin", ``, false, 0},
				{"files PUT, chunked 1 GiB", "PUT", sid + "/files?path=big.bin", ``, true, 100 << 20},
				{"mkdir, chunked 1 GiB", "POST", sid + "/files/mkdir?path=d", `{`, true, 1 << 20},
			}
			for _, c := range cases {
				start := time.Now()
				status, body, sent := advStreamHuge(t, c.method, c.path, []byte(c.prefix), gib, c.chunked)
				advWantAPIError(t, c.name, status, body)
				if status != http.StatusRequestEntityTooLarge {
					t.Errorf("%s: %d, want 413", c.name, status)
				}
				// Whatever the daemon reads past its limit sits in socket
				// buffers; allow 64 MiB for them.
				if sent > c.maxRead+64<<20 {
					t.Errorf("%s: answered after %d MiB were sent, limit %d MiB", c.name, sent>>20, c.maxRead>>20)
				}
				notes = append(notes, fmt.Sprintf("%s: %d after %d MiB in %v (paddockd VmRSS now %d MiB)", c.name, status, sent>>20, time.Since(start).Round(time.Millisecond), advDaemonRSS()>>10))
			}
		})

		seqPeak = sampler.peak.Load()
		t.Run("concurrent huge exec bodies", func(t *testing.T) {
			// Each exec body may be up to 24 MiB and is decoded in memory:
			// this measures what 8 of them at once cost the daemon.
			var wg sync.WaitGroup
			var statuses sync.Map
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					status, _, _ := advStreamHuge(t, "POST", sid+"/exec", []byte(`{"argv":["true"],"stdin":"`), 1<<30, false)
					statuses.Store(i, status)
				}()
			}
			wg.Wait()
			statuses.Range(func(k, v any) bool {
				if v.(int) != http.StatusRequestEntityTooLarge {
					t.Errorf("request %v: %v, want 413", k, v)
				}
				return true
			})
			grown := advDaemonRSS() - seqPeak
			notes = append(notes, fmt.Sprintf("8 concurrent 1 GiB exec bodies: paddockd VmRSS now %d MiB (+%d MiB)", advDaemonRSS()>>10, grown>>10))
			// KNOWN ISSUE (reported): each in-flight exec body is decoded in
			// memory up to its 24 MiB limit, so concurrent oversized bodies
			// cost the daemon tens of MiB each. Only a runaway is an error.
			if grown > 8*128<<10 {
				t.Errorf("8 concurrent oversized exec bodies grew paddockd by %d MiB", grown>>10)
			}
		})

		t.Run("malformed", func(t *testing.T) {
			deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
			many := func(n int, val string) string {
				var b strings.Builder
				b.WriteString("{")
				for i := range n {
					if i > 0 {
						b.WriteString(",")
					}
					fmt.Fprintf(&b, `"K%d":%q`, i, val)
				}
				b.WriteString("}")
				return b.String()
			}
			longPath := strings.Repeat("a/", 4000)
			cases := []struct {
				name, method, path, body string
				hdr                      map[string]string
				ok                       bool // a 2xx is acceptable too (the input is harmless once decoded)
			}{
				{"json bomb create 100k deep", "POST", "/v1/sandboxes", `{"metadata":` + deep(100000) + `}`, nil, false},
				{"json bomb exec 100k deep", "POST", sid + "/exec", `{"argv":` + deep(100000) + `}`, nil, false},
				{"json bomb objects", "POST", "/v1/sandboxes", strings.Repeat(`{"env":`, 50000) + "1" + strings.Repeat("}", 50000), nil, false},
				{"json wrong types", "POST", sid + "/exec", `{"argv":"ls","timeout_seconds":"x"}`, nil, false},
				{"json huge number", "POST", "/v1/sandboxes", `{"timeout_seconds":1e400}`, nil, false},
				{"json number overflow", "POST", sid + "/exec", `{"argv":["true"],"max_output_bytes":99999999999999999999999}`, nil, false},
				{"json negative resources", "POST", "/v1/sandboxes", `{"resources":{"memory_mib":-1,"vcpus":-5}}`, nil, false},
				{"json trailing garbage", "POST", "/v1/sandboxes", `{}{"x":1}`, nil, false},
				{"json not an object", "POST", "/v1/sandboxes", `"sandbox"`, nil, false},
				{"metadata 1000 keys", "POST", "/v1/sandboxes", `{"metadata":` + many(1000, "v") + `}`, nil, false},
				{"env 10000 vars on create", "POST", "/v1/sandboxes", `{"env":` + many(10000, "v") + `}`, nil, false},
				{"env 10000 vars on exec", "POST", sid + "/exec", `{"argv":["true"],"env":` + many(10000, "v") + `}`, nil, false},
				{"env NUL value", "POST", sid + "/exec", `{"argv":["true"],"env":{"A":"x\u0000y"}}`, nil, false},
				{"env key with =", "POST", sid + "/exec", `{"argv":["true"],"env":{"A=B":"x"}}`, nil, false},
				{"env invalid utf-8 key", "POST", sid + "/exec", "{\"argv\":[\"true\"],\"env\":{\"\xff\xfe\":\"x\"}}", nil, true},
				{"env invalid utf-8 value", "POST", sid + "/exec", "{\"argv\":[\"true\"],\"env\":{\"A\":\"\xff\xfe\"}}", nil, true},
				{"env lone surrogate", "POST", sid + "/exec", `{"argv":["true"],"env":{"A":"\udc80"}}`, nil, true},
				{"create env NUL", "POST", "/v1/sandboxes", `{"env":{"A":"\u0000"}}`, nil, false},
				{"metadata invalid utf-8", "POST", "/v1/sandboxes", "{\"metadata\":{\"k\":\"\xc3\x28\"}}", nil, true},
				{"argv invalid utf-8", "POST", sid + "/exec", "{\"argv\":[\"echo\",\"\xff\"]}", nil, true},
				{"argv 5000 args", "POST", sid + "/exec", `{"argv":["true"` + strings.Repeat(`,"a"`, 5000) + `]}`, nil, false},
				{"cwd traversal", "POST", sid + "/exec", `{"argv":["cat","etc/shadow"],"cwd":"../../../../../../"}`, nil, true},
				{"cwd NUL", "POST", sid + "/exec", `{"argv":["true"],"cwd":"/tmp\u0000"}`, nil, false},
				{"path traversal", "GET", sid + "/files?path=" + url.QueryEscape("../../../../../../../etc/shadow"), "", nil, false},
				{"path traversal absolute", "GET", sid + "/files?path=" + url.QueryEscape("/../../../root/.bash_history"), "", nil, false},
				{"path NUL", "GET", sid + "/files?path=a%00b", "", nil, false},
				{"path NUL put", "PUT", sid + "/files?path=%2Ftmp%2Fa%00%2F..%2F..%2Fetc%2Fshadow", "x", nil, false},
				{"path invalid utf-8", "GET", sid + "/files?path=%ff%fe%fd", "", nil, false},
				{"path invalid utf-8 put", "PUT", sid + "/files?path=%ff%fe%fd", "x", nil, true},
				{"path 8000 bytes", "GET", sid + "/files?path=" + longPath, "", nil, false},
				{"path empty", "GET", sid + "/files?path=", "", nil, false},
				// The files API runs in the agent (PID 1), which may read its own
				// /proc entries; they report size 0, so nothing is returned.
				{"path agent environ", "GET", sid + "/files?path=/proc/1/environ", "", nil, true},
				{"path agent mem", "GET", sid + "/files?path=/proc/1/mem", "", nil, true},
				{"path agent fd", "GET", sid + "/files?path=/proc/1/fd/3", "", nil, false},
				{"put over the agent", "PUT", sid + "/files?path=/.paddock/paddock-agent", "#!/bin/sh\n", nil, false},
				{"path kmsg", "GET", sid + "/files?path=/dev/kmsg", "", nil, false},
				{"put into /proc", "PUT", sid + "/files?path=/proc/sys/kernel/hostname", "escaped", nil, false},
				{"put onto /", "PUT", sid + "/files?path=/", "x", nil, false},
				{"delete /", "DELETE", sid + "/files?path=/&recursive=true", "", nil, false},
				{"delete /proc", "DELETE", sid + "/files?path=/proc&recursive=true", "", nil, false},
				{"mkdir in /usr", "POST", sid + "/files/mkdir?path=/usr/escape", "", nil, false},
				{"list depth 1000", "GET", sid + "/files/list?path=/&depth=1000", "", nil, false},
				{"list depth -1", "GET", sid + "/files/list?path=/&depth=-1", "", nil, false},
				{"mode bogus", "PUT", sid + "/files?path=m&mode=99999", "x", nil, false},
				{"id traversal", "GET", "/v1/sandboxes/..%2F..%2Fetc", "", nil, false},
				{"id traversal exec", "POST", "/v1/sandboxes/..%2Fcontainers/exec", `{"argv":["true"]}`, nil, false},
				{"id traversal delete", "DELETE", "/v1/sandboxes/..%2F..%2F", "", nil, false},
				{"id NUL", "GET", "/v1/sandboxes/sb%00x", "", nil, false},
				{"id 10 KiB", "GET", "/v1/sandboxes/" + strings.Repeat("x", 10<<10), "", nil, false},
				{"process id traversal", "GET", sid + "/processes/..%2F..%2Fetc", "", nil, false},
				{"header 70 KiB", "GET", "/v1/sandboxes", "", map[string]string{"X-Big": strings.Repeat("h", 70<<10)}, false},
				{"auth header 60 KiB", "GET", "/v1/sandboxes", "", map[string]string{"Authorization": "Bearer " + strings.Repeat("k", 60<<10)}, false},
				{"query 60 KiB", "GET", "/v1/sandboxes?" + strings.Repeat("metadata.a=b&", 4000), "", nil, true},
				{"list limit huge", "GET", "/v1/sandboxes?limit=99999999999999999999", "", nil, false},
				{"list cursor garbage", "GET", "/v1/sandboxes?cursor=%ff%00garbage", "", nil, false},
			}
			for _, c := range cases {
				status, b := advRaw(t, c.method, c.path, c.hdr, []byte(c.body))
				switch {
				case status >= 500:
					t.Errorf("%s: %d %.300q", c.name, status, b)
				case c.ok && status < 300:
					if strings.Contains(c.path, "/proc/1/") && len(b) > 0 {
						t.Errorf("%s: returned %d bytes", c.name, len(b))
					}
				case status == http.StatusRequestHeaderFieldsTooLarge:
					// Go's http.Server answers 431 itself, in plain text,
					// before any handler runs.
				default:
					advWantAPIError(t, c.name, status, b)
				}
				if bytes.Contains(b, []byte("root:")) && strings.Contains(c.path+c.body, "shadow") {
					t.Errorf("%s: %q", c.name, b)
				}
				var created api.Sandbox
				if status == http.StatusCreated && json.Unmarshal(b, &created) == nil && created.ID != "" {
					shared.client(0).Sandbox(created.ID).Close()
				}
				notes = append(notes, fmt.Sprintf("%s: %d", c.name, status))
			}
		})
	})
	peak := sampler.Stop()
	advDaemonAnswers(t)
	if r := advExec(t, sb, "echo usable", 10); r.Stdout != "usable\n" {
		t.Errorf("sandbox after the inputs: %+v", r)
	}
	rss1 := advDaemonRSS()
	t.Logf("paddockd VmRSS %d MiB before, %d MiB peak with one request at a time, %d MiB peak overall, %d MiB after; worst other-tenant latency %v\n%s",
		rss0>>10, seqPeak>>10, peak>>10, rss1>>10, worst, strings.Join(notes, "\n"))
	if seqPeak-rss0 > 256<<10 {
		t.Errorf("paddockd grew by %d MiB with one oversized request at a time", (seqPeak-rss0)>>10)
	}
}

// TestAdversarialAPIFlood opens many concurrent execs and half-open
// requests against one sandbox while another tenant keeps working, then
// exhausts the sandbox's pids limit with concurrent execs: each answer is
// a result or a 4xx.
func TestAdversarialAPIFlood(t *testing.T) {
	ctx := ctxT(t)
	flood := func(sb *client.Sandbox, n int) map[string]int {
		var mu sync.Mutex
		outcomes := map[string]int{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := sb.Exec(ctx, api.ExecRequest{Command: fmt.Sprintf("sleep 1; echo %d", i), TimeoutSeconds: 30})
				var key string
				var ae *client.APIError
				switch {
				case errors.As(err, &ae):
					key = fmt.Sprintf("%d %s: %s", ae.StatusCode, ae.Code, ae.Message)
				case err != nil:
					key = "error: " + err.Error()
				case strings.TrimSpace(res.Stdout) == fmt.Sprint(i):
					key = "ok"
				default:
					key = fmt.Sprintf("result exit %v signal %v stderr %.80q", ptr(res.ExitCode), ptr(res.Signal), res.Stderr)
				}
				mu.Lock()
				outcomes[key]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return outcomes
	}

	t.Run("200 concurrent execs and 200 half-open requests", func(t *testing.T) {
		sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{PIDs: 8192}})
		rss0 := advDaemonRSS()
		sampler := advSampleRSS()
		var outcomes map[string]int
		worst := advProbe(t, func() {
			// Half-open requests: headers sent, body never finished.
			var conns []net.Conn
			for range 200 {
				c, err := net.Dial("tcp", shared.opts.listen)
				if err != nil {
					break
				}
				fmt.Fprintf(c, "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n{", sb.ID, shared.keys[0])
				conns = append(conns, c)
			}
			outcomes = flood(sb, 200)
			for _, c := range conns {
				c.Close()
			}
		})
		peak := sampler.Stop()
		advDaemonAnswers(t)
		if outcomes["ok"] != 200 {
			t.Errorf("outcomes of 200 concurrent execs: %v", outcomes)
		}
		t.Logf("outcomes %v; paddockd VmRSS %d -> peak %d MiB; worst other-tenant latency %v", outcomes, rss0>>10, peak>>10, worst)
	})

	t.Run("pids exhaustion", func(t *testing.T) {
		sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{PIDs: 64}})
		var outcomes map[string]int
		worst := advProbe(t, func() { outcomes = flood(sb, 60) })
		var fivexx []string
		for k, n := range outcomes {
			if k[0] == '5' || strings.HasPrefix(k, "error") {
				fivexx = append(fivexx, fmt.Sprintf("%dx %s", n, k))
			}
		}
		if len(fivexx) > 0 {
			// KNOWN ISSUE (reported): the agent answers 429 when fork fails
			// (EAGAIN), which the daemon's proxy turns into 502, and a shim
			// that cannot start its threads becomes a 500.
			t.Logf("KNOWN ISSUE: server errors while the sandbox is out of pids: %v", fivexx)
		}
		if r := advExec(t, sb, "echo usable", 30); r.Stdout != "usable\n" {
			t.Errorf("sandbox after pids exhaustion: %+v", r)
		}
		t.Logf("60 concurrent execs with pids=64: %v; worst other-tenant latency %v", outcomes, worst)
	})
}
