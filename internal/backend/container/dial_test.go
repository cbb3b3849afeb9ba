package container

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestDialSocketRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) string {
		p := filepath.Join(dir, name)
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(name))
				c.Close()
			}
		}()
		return p
	}
	agent, host := listen("agent.sock"), listen("host.sock")
	if err := os.Symlink(host, filepath.Join(dir, "link.sock")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string // what the peer says, "" for an error
	}{
		{agent, "agent.sock"},
		{filepath.Join(dir, "link.sock"), ""},
		{filepath.Join(dir, "file.sock"), ""},
		{filepath.Join(dir, "missing.sock"), ""},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			c, err := dialSocket(context.Background(), tt.path)
			if tt.want == "" {
				if err == nil {
					c.Close()
					t.Fatal("dialed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			if string(buf[:n]) != tt.want {
				t.Fatalf("peer %q, want %q", buf[:n], tt.want)
			}
		})
	}
}
