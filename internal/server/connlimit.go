package server

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Defaults of ConnLimits.
const (
	// DefaultMaxConns bounds a listener's open connections; it is lowered
	// to a quarter of the process's file descriptor limit when that is
	// smaller, so connections can never take the descriptors sandboxes,
	// the store and the reaper need.
	DefaultMaxConns = 4096
	// DefaultMaxConnsPerAddr bounds the open connections of one client
	// address (an IPv4 address or an IPv6 /64).
	DefaultMaxConnsPerAddr = 512
	// maxRefusing bounds the connections being answered 503 at once;
	// past it a connection over the limits is closed without an answer.
	maxRefusing = 64
)

// ConnLimits bounds the connections a listener accepts. Past a bound a
// new connection is answered "503 Service Unavailable" (a JSON error of
// code unavailable) and closed.
type ConnLimits struct {
	MaxConns        int
	MaxConnsPerAddr int
}

// withDefaults fills in zero fields and clamps MaxConns to the process's
// descriptor limit.
func (l ConnLimits) withDefaults() ConnLimits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
		var rl syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur > 0 && rl.Cur/4 < uint64(l.MaxConns) {
			l.MaxConns = max(int(rl.Cur/4), 64)
		}
	}
	if l.MaxConnsPerAddr <= 0 {
		l.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	l.MaxConnsPerAddr = min(l.MaxConnsPerAddr, l.MaxConns)
	return l
}

// LimitListener wraps ln so that it holds at most lim's connections.
func LimitListener(ln net.Listener, lim ConnLimits, log *slog.Logger) net.Listener {
	return &limitListener{Listener: ln, lim: lim.withDefaults(), perAddr: map[string]int{},
		refusing: make(chan struct{}, maxRefusing), log: log}
}

type limitListener struct {
	net.Listener
	lim      ConnLimits
	log      *slog.Logger
	refusing chan struct{}

	mu      sync.Mutex
	total   int
	perAddr map[string]int
	// warned rate-limits the log line about refused connections.
	warned time.Time
}

// Accept returns the next connection within the limits; connections over
// them are refused on the way.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(c.RemoteAddr())
		if reason := l.acquire(key); reason != "" {
			l.refuse(c, reason)
			continue
		}
		return &limitConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

func (l *limitListener) acquire(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	reason := ""
	switch {
	case l.total >= l.lim.MaxConns:
		reason = fmt.Sprintf("the daemon holds %d connections (--max-conns)", l.total)
	case l.perAddr[key] >= l.lim.MaxConnsPerAddr:
		reason = fmt.Sprintf("this address holds %d connections (--max-conns-per-addr)", l.perAddr[key])
	}
	if reason != "" {
		if time.Since(l.warned) > 10*time.Second {
			l.warned = time.Now()
			l.log.Warn("connections refused over the limits", "addr", key, "reason", reason)
		}
		return reason
	}
	l.total++
	l.perAddr[key]++
	return ""
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perAddr[key]--; l.perAddr[key] <= 0 {
		delete(l.perAddr, key)
	}
}

// refuse answers c with a 503 and closes it, in the background and
// bounded: when maxRefusing answers are under way c is just closed.
func (l *limitListener) refuse(c net.Conn, reason string) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		body := fmt.Sprintf(`{"error":{"code":"unavailable","message":"too many connections: %s"}}`+"\n", reason)
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
		// Half-close and drain a little so the client reads the answer
		// before the connection is reset.
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			tc.CloseWrite()
		}
		buf := make([]byte, 4096)
		for i := 0; i < 16; i++ {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// limitConn gives its slot back once, when closed.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// CloseWrite half-closes a TCP connection: net/http does so before closing
// one whose request it did not read whole, so that the client reads the
// answer instead of a reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// addrKey is the address a connection counts against: the IP of an IPv4
// peer, the /64 of an IPv6 one.
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
