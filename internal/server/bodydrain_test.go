package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLateBodyConnectionClose sends a request with "Connection: close"
// whose body comes in later writes, after the server may already have
// answered (a route that reads no body: pause, resume, delete, a 401). The
// answer must arrive whole, not be lost to a connection reset because the
// server closed the socket with the body unread.
func TestLateBodyConnectionClose(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	host := strings.TrimPrefix(ts.url, "http://")
	for _, tc := range []struct {
		name, method, path, key string
		want                    []int // the first try's, then the others'
	}{
		{"pause", "POST", "/v1/sandboxes/" + sb.ID + "/pause", ts.alice, []int{http.StatusOK, http.StatusConflict}},
		{"resume", "POST", "/v1/sandboxes/" + sb.ID + "/resume", ts.alice, []int{http.StatusOK, http.StatusConflict}},
		{"unauthorized", "POST", "/v1/sandboxes/" + sb.ID + "/pause", "nope", []int{http.StatusUnauthorized, http.StatusUnauthorized}},
		{"no route", "POST", "/v1/nothing", ts.alice, []int{http.StatusNotFound, http.StatusNotFound}},
		{"delete", "DELETE", "/v1/sandboxes/" + sb.ID, ts.alice, []int{http.StatusNoContent, http.StatusNoContent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The last delay outlasts the server's wait between closing its
			// side and closing the socket (net/http's 500 ms).
			for i, delay := range []time.Duration{0, 20 * time.Millisecond, 700 * time.Millisecond} {
				c, err := net.Dial("tcp", host)
				if err != nil {
					t.Fatal(err)
				}
				// An empty JSON object padded with whitespace: valid for
				// every route that reads a body (pause takes options).
				body := "{" + strings.Repeat(" ", 4000) + "}"
				fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
					tc.method, tc.path, host, tc.key, len(body))
				time.Sleep(delay) // the server may answer meanwhile
				// The body in two writes: the second one meets a closed
				// socket unless the server waits for the body.
				if _, err := c.Write([]byte(body[:10])); err != nil {
					t.Fatalf("try %d: writing the body: %v", i, err)
				}
				time.Sleep(20 * time.Millisecond)
				if _, err := c.Write([]byte(body[10:])); err != nil {
					t.Fatalf("try %d: writing the body: %v", i, err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					c.Close()
					t.Fatalf("try %d: reading the answer: %v", i, err)
				}
				resp.Body.Close()
				c.Close()
				if want := tc.want[min(i, 1)]; resp.StatusCode != want {
					t.Fatalf("try %d: status %d, want %d", i, resp.StatusCode, want)
				}
			}
		})
	}
}
