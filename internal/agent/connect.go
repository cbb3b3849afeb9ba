package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// UpgradeTCP is the HTTP Upgrade token of GET /connect: after a 101 answer
// the connection carries raw bytes to and from a TCP port inside the
// sandbox. It lets the daemon reach servers a sandbox runs, whatever its
// network mode.
const UpgradeTCP = "paddock-tcp"

// handleConnect relays a hijacked connection to 127.0.0.1:port inside the
// sandbox (GET /connect?port=N with Upgrade: paddock-tcp).
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	fail := func(code, msg string) {
		writeJSON(w, api.StatusOf(code), api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
	}
	port, err := strconv.Atoi(r.URL.Query().Get("port"))
	if err != nil || port < 1 || port > 65535 {
		fail(api.CodeBadRequest, "port must be 1-65535")
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), UpgradeTCP) {
		fail(api.CodeBadRequest, "want Upgrade: "+UpgradeTCP)
		return
	}
	up, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		fail(api.CodeNotFound, fmt.Sprintf("nothing listens on port %d in the sandbox", port))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		fail(api.CodeInternal, "connection cannot be upgraded")
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", UpgradeTCP)
	if err := brw.Flush(); err != nil {
		conn.Close()
		up.Close()
		return
	}
	relay(conn, brw.Reader, up)
}

// relay copies both ways until either side is done, then closes both.
func relay(client net.Conn, buffered *bufio.Reader, up net.Conn) {
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, buffered) // includes bytes already buffered
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(client, up)
		if cw, ok := client.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
	client.Close()
	up.Close()
}

// ListeningPort is a TCP port a process in the sandbox listens on.
type ListeningPort struct {
	Port    int    `json:"port"`
	Address string `json:"address"`
}

// handlePorts lists listening TCP ports (GET /ports), from /proc/net/tcp
// and tcp6 of the sandbox's network namespace.
func (s *Server) handlePorts(w http.ResponseWriter, r *http.Request) error {
	seen := map[int]ListeningPort{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, p := range listening(f) {
			if _, ok := seen[p.Port]; !ok {
				seen[p.Port] = p
			}
		}
	}
	out := make([]ListeningPort, 0, len(seen))
	for _, p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	writeJSON(w, http.StatusOK, map[string]any{"ports": out})
	return nil
}

// listening parses a /proc/net/tcp file for sockets in LISTEN state (0A).
func listening(path string) []ListeningPort {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []ListeningPort
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 4 || f[3] != "0A" {
			continue
		}
		addr, portHex, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseInt(portHex, 16, 32)
		if err != nil {
			continue
		}
		a := "0.0.0.0"
		switch {
		case addr == "0100007F":
			a = "127.0.0.1"
		case strings.Trim(addr, "0") == "":
			if len(addr) > 8 {
				a = "::"
			}
		case len(addr) > 8:
			a = "ipv6"
		default:
			a = "other"
		}
		out = append(out, ListeningPort{Port: int(port), Address: a})
	}
	return out
}
