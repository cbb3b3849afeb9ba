package agent

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Bounds of the token handshake of a TCP listener (the pod backend: the
// agent is reached over the pod network, where any pod may connect).
const (
	// TokenLen is the length of a per-sandbox token (hex of 32 random bytes).
	TokenLen = 64
	// TokenHandshakeTimeout bounds how long a connection may take to send
	// its token before it is closed.
	TokenHandshakeTimeout = 5 * time.Second
	// MaxTokenHandshakes bounds the connections sending their token at
	// once; more wait to be accepted (the kernel's backlog holds them).
	MaxTokenHandshakes = 64
)

// ErrBadToken: a token that is not TokenLen bytes.
var ErrBadToken = errors.New("agent token must be 64 characters")

// TokenListener wraps a TCP listener: a connection is handed to the agent
// only after its first TokenLen bytes equal token (compared in constant
// time); any other connection is closed without an answer. Handshakes run
// concurrently, each bounded by TokenHandshakeTimeout, at most
// MaxTokenHandshakes at once.
func TokenListener(ln net.Listener, token string) (net.Listener, error) {
	if len(token) != TokenLen {
		return nil, ErrBadToken
	}
	t := &tokenListener{Listener: ln, token: []byte(token), conns: make(chan net.Conn),
		done: make(chan struct{}), sem: make(chan struct{}, MaxTokenHandshakes)}
	go t.acceptLoop()
	return t, nil
}

type tokenListener struct {
	net.Listener
	token []byte
	conns chan net.Conn
	sem   chan struct{}

	once sync.Once
	done chan struct{}
	err  error // set before done is closed
}

func (t *tokenListener) acceptLoop() {
	for {
		t.sem <- struct{}{}
		c, err := t.Listener.Accept()
		if err != nil {
			<-t.sem
			t.once.Do(func() { t.err = err; close(t.done) })
			return
		}
		go func() {
			defer func() { <-t.sem }()
			if !t.handshake(c) {
				c.Close()
				return
			}
			select {
			case t.conns <- c:
			case <-t.done:
				c.Close()
			}
		}()
	}
}

// handshake reads the token within the timeout and checks it.
func (t *tokenListener) handshake(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(TokenHandshakeTimeout))
	got := make([]byte, TokenLen)
	if _, err := io.ReadFull(c, got); err != nil {
		return false
	}
	c.SetReadDeadline(time.Time{})
	return subtle.ConstantTimeCompare(got, t.token) == 1
}

func (t *tokenListener) Accept() (net.Conn, error) {
	select {
	case c := <-t.conns:
		return c, nil
	case <-t.done:
		return nil, t.err
	}
}

func (t *tokenListener) Close() error {
	err := t.Listener.Close()
	t.once.Do(func() { t.err = net.ErrClosed; close(t.done) })
	return err
}

// DialToken connects to an agent behind a TokenListener at addr (host:port)
// and sends token; the connection then speaks the agent's HTTP API.
func DialToken(ctx context.Context, addr, token string) (net.Conn, error) {
	if len(token) != TokenLen {
		return nil, ErrBadToken
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, token); err != nil {
		c.Close()
		return nil, fmt.Errorf("agent token: %w", err)
	}
	return c, nil
}
