package server_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestTerminalRelay opens a terminal through the server's WebSocket relay
// to a fake sandbox's agent.
func TestTerminalRelay(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(ts.url, ts.alice).Sandbox(sb.ID)

	term, err := c.OpenPTY(ctx, client.PTYOptions{Argv: []string{"/bin/sh"}, Cols: 70, Rows: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	read := func(want string) {
		t.Helper()
		var out bytes.Buffer
		buf := make([]byte, 1024)
		for !strings.Contains(out.String(), want) {
			n, err := term.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q: %v in %q", want, err, out.String())
			}
			out.Write(buf[:n])
		}
	}
	term.Write([]byte("stty size\n"))
	read("20 70")
	if err := term.Resize(ctx, 90, 33); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("stty size\n"))
	read("33 90")
	list, err := c.PTYs(ctx)
	if err != nil || len(list) != 1 || list[0].ID != term.ID {
		t.Fatalf("list %+v %v", list, err)
	}
	term.Write([]byte("exit 2\n"))
	m, err := term.Wait()
	if err != nil || m == nil || m.ExitCode == nil || *m.ExitCode != 2 {
		t.Fatalf("exit %+v %v", m, err)
	}

	cases := []struct {
		name string
		key  string
		opts client.PTYOptions
		want error
	}{
		{"another key's sandbox", ts.bob, client.PTYOptions{}, client.ErrNotFound},
		{"bad size", ts.alice, client.PTYOptions{Rows: 1001}, client.ErrBadRequest},
		{"no key", "", client.PTYOptions{}, client.ErrUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(ts.url, tc.key).Sandbox(sb.ID).OpenPTY(ctx, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestWatchRelay(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New(ts.url, ts.alice).Sandbox(sb.ID)
	w, err := c.Watch(ctx, ".", false)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ts.exec(ts.alice, sb.ID, api.ExecRequest{Command: "touch new-file"})
	ev, err := w.Next()
	if err != nil || ev.Type != api.WatchCreate || !strings.HasSuffix(ev.Path, "/new-file") {
		t.Fatalf("event %+v %v", ev, err)
	}
	if _, err := client.New(ts.url, ts.bob).Sandbox(sb.ID).Watch(ctx, ".", false); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("another key's watch: %v", err)
	}
}
