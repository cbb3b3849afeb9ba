package agent

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestResumeArgs: the agent comes back with its own command line, its
// listener and state replaced by the descriptors it hands over, whatever
// form the flags had and however often it hibernated.
func TestResumeArgs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a serve --listen-fd 3 --workdir /w", "/a serve --workdir /w --listen-fd 7 --state-fd 8"},
		{"/a serve --listen=/s.sock --nproc 9", "/a serve --nproc 9 --listen-fd 7 --state-fd 8"},
		{"/a serve -listen-fd=3 --state-fd 9 --idle-exec /i", "/a serve --idle-exec /i --listen-fd 7 --state-fd 8"},
		{"/a serve --workdir /w --listen-fd 7 --state-fd 8", "/a serve --workdir /w --listen-fd 7 --state-fd 8"},
		// a value that looks like a dropped flag is kept with its flag
		{"/a serve --workdir --listen --listen-fd 3", "/a serve --workdir --listen --listen-fd 7 --state-fd 8"},
		{"/a serve --debug --listen-fd 3 --nproc=5", "/a serve --debug --nproc=5 --listen-fd 7 --state-fd 8"},
	}
	for _, tt := range tests {
		got := strings.Join(resumeArgs(strings.Fields(tt.in), "7", "8"), " ")
		if got != tt.want {
			t.Errorf("resumeArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestResumeState: what an agent saves before it hibernates is what the
// next one reads back; a state too large or not JSON is refused.
func TestResumeState(t *testing.T) {
	mem := func(b []byte) int {
		fd, err := unix.MemfdCreate("state", 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(fd, b); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	s := NewServer(Config{Workdir: t.TempDir(), SpareIdle: time.Minute}, nil)
	s.env.vars = map[string]string{"A": "1", "B": "two words"}
	s.procs.setSeq(41)
	s.hib.gate = newGateListener(unixListener(t))
	s.cfg.IdleExec, s.cfg.Args = "/idle", []string{"/agent", "serve", "--listen-fd", "3"}
	argv, files, err := s.hibernateArgs(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(argv) != 8 || argv[0] != "/idle" || argv[2] != "/agent" || argv[4] != "--listen-fd" || argv[1] != argv[5] || argv[6] != "--state-fd" {
		t.Fatalf("argv %q", argv)
	}
	for _, a := range []string{argv[1], argv[7]} {
		fd, _ := strconv.Atoi(a)
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			t.Fatalf("descriptor %d is closed on exec (%d, %v)", fd, flags, err)
		}
	}
	sfd, _ := strconv.Atoi(argv[7])
	dup, err := unix.Dup(sfd) // readResumeState closes what it reads
	if err != nil {
		t.Fatal(err)
	}
	st, err := readResumeState(dup)
	if err != nil {
		t.Fatal(err)
	}
	s2 := NewServer(Config{Workdir: t.TempDir()}, nil)
	s2.resume(st)
	if !maps.Equal(s2.env.vars, s.env.vars) || s2.shims.idle != time.Minute || s2.procs.lastSeq() != 41 {
		t.Fatalf("resumed %+v idle %v seq %d", s2.env.vars, s2.shims.idle, s2.procs.lastSeq())
	}
	if id, _ := s2.procs.reserve(); id != "proc-42" {
		t.Fatalf("next process id %q", id)
	}

	for _, bad := range [][]byte{[]byte("not json"), []byte(`{"env":"` + strings.Repeat("x", maxStateBytes) + `"}`)} {
		if _, err := readResumeState(mem(bad)); err == nil {
			t.Errorf("state %.20q read without error", bad)
		}
	}
	if _, err := readResumeState(9999); err == nil {
		t.Error("a closed descriptor read without error")
	}
}

// TestGateListener: paused, the listener accepts nothing (a connection
// waits in the backlog) and counts the connections still open; resumed,
// it accepts the waiting one.
func TestGateListener(t *testing.T) {
	g := newGateListener(unixListener(t))
	accepted := make(chan net.Conn, 4)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("unix", g.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	if !g.pause() {
		t.Fatal("pause: the listener stopped")
	}
	if n := g.open.Load(); n != 1 {
		t.Fatalf("open %d, want 1", n)
	}
	first.Close()
	first.Close() // counted once
	if n := g.open.Load(); n != 0 {
		t.Fatalf("open %d after close, want 0", n)
	}
	dial()
	select {
	case <-accepted:
		t.Fatal("accepted while paused")
	case <-time.After(200 * time.Millisecond):
	}
	g.resume()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting connection was not accepted after resume")
	}
	g.Close()
	<-stopped // Accept failed: the server stopped accepting
	if g.pause() {
		t.Fatal("pause after close: reported parked")
	}
}

func unixListener(t *testing.T) *net.UnixListener {
	t.Helper()
	dir, err := os.MkdirTemp("", "hib")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
