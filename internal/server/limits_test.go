package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/server"
)

// rawConn opens a connection to ts and sends head (and no more).
func rawConn(t *testing.T, ts *testServer, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, head)
	return c
}

// readAnswer reads one HTTP answer from c.
func readAnswer(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBodyIdle: a body that stalls is answered 400 naming the flag, and
// a stalled large exec body of one key does not hold another key's.
func TestBodyIdle(t *testing.T) {
	ts := newTestServerWith(t, func(c *server.Config) {
		c.Limits.BodyIdleTimeout, c.Limits.WriteIdleTimeout = 300*time.Millisecond, 300*time.Millisecond
		c.BigBodiesPerKey, c.BigBodyDecodes = 1, 1
	})
	sbA, sbB := ts.create(ts.alice), ts.create(ts.bob)
	head := func(key, id string, n int) string {
		return fmt.Sprintf("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"command\":\"true\",\"stdin\":\"xx", id, key, n)
	}
	var stalled []net.Conn
	for range 3 {
		stalled = append(stalled, rawConn(t, ts, head(ts.alice, sbA.ID, 20<<20)+strings.Repeat("x", 1<<20)))
	}
	big := strings.Repeat("y", 2<<20)
	if res := ts.exec(ts.bob, sbB.ID, api.ExecRequest{Command: "cat | wc -c", Stdin: big}); res.Stdout != "2097152\n" {
		t.Fatalf("bob's large exec: %+v", res)
	}
	for _, c := range stalled {
		st, body := readAnswer(t, c)
		if st != 400 || !strings.Contains(body, "body-idle-timeout") {
			t.Fatalf("stalled body: %d %s", st, body)
		}
	}
}

// TestConnLimits: past the per-address bound a connection is answered
// 503 with the JSON error, and a closed connection frees its slot.
func TestConnLimits(t *testing.T) {
	ts := newTestServerWith(t, func(c *server.Config) { c.Limits.Conns.MaxConnsPerAddr = 2 })
	a := rawConn(t, ts, "")
	rawConn(t, ts, "")
	time.Sleep(100 * time.Millisecond) // let the server accept both
	st, body := readAnswer(t, rawConn(t, ts, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"))
	if st != 503 || !strings.Contains(body, `"code":"unavailable"`) || !strings.Contains(body, "max-conns-per-addr") {
		t.Fatalf("third connection: %d %s", st, body)
	}
	a.Close()
	for i := 0; ; i++ {
		st, _ := readAnswer(t, rawConn(t, ts, "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		if st == 200 {
			break
		}
		if i > 50 {
			t.Fatalf("the closed connection's slot was not freed: %d", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
