package agent

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestTokenListener(t *testing.T) {
	token := strings.Repeat("ab", TokenLen/2)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := TokenListener(raw, token)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "ok")
			c.Close()
		}
	}()
	ctx := context.Background()
	cases := []struct {
		name, token string
		want        string
	}{
		{"right token", token, "ok"},
		{"wrong token", strings.Repeat("cd", TokenLen/2), ""},
		{"short token then close", token[:10], ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", raw.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, c.token)
			if len(c.token) < TokenLen {
				conn.(*net.TCPConn).CloseWrite()
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, _ := io.ReadAll(conn)
			if string(got) != c.want {
				t.Fatalf("answer %q, want %q", got, c.want)
			}
		})
	}
	if _, err := DialToken(ctx, raw.Addr().String(), "short"); err != ErrBadToken {
		t.Fatalf("DialToken with a short token: %v", err)
	}
	if _, err := TokenListener(raw, "short"); err != ErrBadToken {
		t.Fatalf("TokenListener with a short token: %v", err)
	}
}
