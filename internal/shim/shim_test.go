package shim

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain lets the test binary serve as a shim, started the way the
// agent starts one (Argv: "paddock-shim shim").
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(Run(os.Args[2:]))
	}
	if os.Getenv("PADDOCK_SHIM_TEST_THREADS") != "" {
		spareThreadsChild()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// started is a shim started by a test: its control socket, status lines
// and process.
type started struct {
	cmd    *exec.Cmd
	ctl    *os.File
	status *bufio.Scanner
}

func startShim(t *testing.T) *started {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, child := os.NewFile(uintptr(pair[0]), "ctl"), os.NewFile(uintptr(pair[1]), "child")
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe", Argv()[1:]...)
	cmd.Env = []string{Env}
	cmd.ExtraFiles = []*os.File{statusW, child} // fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	child.Close()
	t.Cleanup(func() {
		ctl.Close()
		statusR.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &started{cmd: cmd, ctl: ctl, status: bufio.NewScanner(statusR)}
}

// next reads the shim's next status line.
func (s *started) next(t *testing.T) Status {
	t.Helper()
	if !s.status.Scan() {
		t.Fatalf("status pipe closed: %v", s.status.Err())
	}
	var st Status
	if err := json.Unmarshal(s.status.Bytes(), &st); err != nil {
		t.Fatalf("status line %q: %v", s.status.Text(), err)
	}
	return st
}

// exit waits for the shim and returns its exit code.
func (s *started) exit() int {
	_ = s.cmd.Wait()
	return s.cmd.ProcessState.ExitCode()
}

// stdio returns /dev/null as stdin and one pipe as stdout and stderr, and
// the pipe's read end.
func stdio(t *testing.T) ([3]*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close(); devnull.Close() })
	return [3]*os.File{devnull, w, w}, r
}

func shSpec(script string) Spec {
	return Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}
}

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name   string
		script string
		code   int
		signal string
		out    string
	}{
		{"exit 0", "echo hi", 0, "", "hi\n"},
		{"exit 3", "echo err >&2; exit 3", 3, "", "err\n"},
		{"killed", "kill -9 $$", 0, "SIGKILL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startShim(t)
			fds, out := stdio(t)
			if err := SendSpec(s.ctl, shSpec(tt.script), fds); err != nil {
				t.Fatal(err)
			}
			fds[1].Close() // the command holds its own copy: EOF when it ends
			if st := s.next(t); st.PID <= 0 || st.Error != "" {
				t.Fatalf("first status %+v, want a pid", st)
			}
			st := s.next(t)
			switch {
			case tt.signal != "":
				if st.Signal != tt.signal || st.ExitCode != nil {
					t.Errorf("status %+v, want signal %s", st, tt.signal)
				}
			case st.ExitCode == nil || *st.ExitCode != tt.code:
				t.Errorf("status %+v, want exit code %d", st, tt.code)
			}
			if !st.Reuse {
				t.Errorf("status %+v: a shim whose command left nothing behind does not say it takes another", st)
			}
			got := make([]byte, 64)
			n, _ := out.Read(got)
			if string(got[:max(n, 0)]) != tt.out {
				t.Errorf("output %q, want %q", got[:max(n, 0)], tt.out)
			}
			s.ctl.Close() // released: the shim waiting for its next spec exits
			if code := s.exit(); code != 0 {
				t.Errorf("shim exited %d, want 0", code)
			}
		})
	}
}

// run sends script to s and returns its two status lines and output.
func (s *started) run(t *testing.T, script string) (first, end Status, output string) {
	t.Helper()
	fds, out := stdio(t)
	if err := SendSpec(s.ctl, shSpec(script), fds); err != nil {
		t.Fatal(err)
	}
	fds[1].Close()
	first = s.next(t)
	if first.PID <= 0 {
		t.Fatalf("first status %+v, want a pid", first)
	}
	end = s.next(t)
	b, _ := io.ReadAll(out)
	return first, end, string(b)
}

// TestRunReuse: a shim whose command ended and left nothing behind takes
// the next command, each under its own limits; one whose command left a
// process running exits, and that process lives on; a stop signal to a
// shim waiting between commands ends it, as it ends a spare.
func TestRunReuse(t *testing.T) {
	s := startShim(t)
	for i, script := range []string{"echo one $PPID", "echo two $PPID; exit 4", "true"} {
		_, end, out := s.run(t, script)
		if !end.Reuse || end.ExitCode == nil {
			t.Fatalf("command %d: status %+v, want an exit and reuse", i, end)
		}
		switch i {
		case 0:
			if want := fmt.Sprintf("one %d\n", s.cmd.Process.Pid); out != want {
				t.Errorf("output %q, want %q", out, want)
			}
		case 1:
			if want := fmt.Sprintf("two %d\n", s.cmd.Process.Pid); out != want || *end.ExitCode != 4 {
				t.Errorf("output %q, exit %d; want %q, 4", out, *end.ExitCode, want)
			}
		}
	}
	// Each command gets the limit of its spec, lower than the last.
	for _, n := range []int{5000, 4000} {
		spec := shSpec("grep 'Max processes' /proc/self/limits")
		spec.NProc = n
		fds, out := stdio(t)
		if err := SendSpec(s.ctl, spec, fds); err != nil {
			t.Fatal(err)
		}
		fds[1].Close()
		s.next(t)
		if end := s.next(t); !end.Reuse {
			t.Fatalf("status %+v", end)
		}
		if b, _ := io.ReadAll(out); !slices.Equal(strings.Fields(string(b))[2:4], []string{strconv.Itoa(n), strconv.Itoa(n)}) {
			t.Errorf("RLIMIT_NPROC %q, want %d", b, n)
		}
	}
	// A process left behind: no reuse, the shim exits, the process stays.
	_, end, out := s.run(t, "sleep 300 >/dev/null 2>&1 & echo $!")
	if end.Reuse {
		t.Errorf("status %+v: reuse with a process left behind", end)
	}
	if code := s.exit(); code != 0 {
		t.Errorf("shim exited %d, want 0", code)
	}
	var orphan int
	if _, err := fmt.Sscan(out, &orphan); err != nil {
		t.Fatalf("pid line %q: %v", out, err)
	}
	t.Cleanup(func() { _ = unix.Kill(orphan, unix.SIGKILL) })
	if err := unix.Kill(orphan, 0); err != nil {
		t.Errorf("the process left behind is gone: %v", err)
	}

	// SIGTERM to a shim between commands ends it (its default action).
	s = startShim(t)
	if _, end, _ := s.run(t, "true"); !end.Reuse {
		t.Fatalf("status %+v", end)
	}
	if err := s.cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != unix.SIGTERM {
		t.Errorf("a shim between commands sent SIGTERM ended with %v, want killed by it", s.cmd.ProcessState)
	}
}

// TestRunRefuses covers what a shim refuses: a closed control socket ends
// a spare quietly; a spec that is oversized, has no argv, or comes without
// its descriptors is reported and nothing runs.
func TestRunRefuses(t *testing.T) {
	header := func(n uint32) []byte {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], n)
		return hdr[:]
	}
	tests := []struct {
		name string
		send func(t *testing.T, s *started)
		want string // in the error status; "" = exits 0 with no status
	}{
		{"closed", func(t *testing.T, s *started) { s.ctl.Close() }, ""},
		{"no argv", func(t *testing.T, s *started) {
			fds, _ := stdio(t)
			if err := SendSpec(s.ctl, Spec{Path: "/bin/true"}, fds); err != nil {
				t.Fatal(err)
			}
		}, "argv"},
		{"oversized", func(t *testing.T, s *started) {
			fds, _ := stdio(t)
			rights := unix.UnixRights(int(fds[0].Fd()), int(fds[1].Fd()), int(fds[2].Fd()))
			if err := unix.Sendmsg(int(s.ctl.Fd()), header(MaxSpecBytes+1), rights, nil, 0); err != nil {
				t.Fatal(err)
			}
		}, "at most"},
		{"no descriptors", func(t *testing.T, s *started) {
			body, _ := json.Marshal(Spec{Path: "/bin/true", Argv: []string{"true"}})
			if _, err := s.ctl.Write(append(header(uint32(len(body))), body...)); err != nil {
				t.Fatal(err)
			}
		}, "descriptors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startShim(t)
			tt.send(t, s)
			if tt.want == "" {
				if s.status.Scan() {
					t.Errorf("a released spare reported %q", s.status.Text())
				}
				if code := s.exit(); code != 0 {
					t.Errorf("a released spare exited %d, want 0", code)
				}
				return
			}
			if st := s.next(t); !strings.Contains(st.Error, tt.want) || st.PID != 0 {
				t.Errorf("status %+v, want an error with %q", st, tt.want)
			}
			if code := s.exit(); code == 0 {
				t.Error("a shim that refused its spec exited 0")
			}
		})
	}
}

// TestStopKillsDescendants: SIGTERM to a shim kills the command and a
// process it put in a session of its own, then reports SIGKILL.
func TestStopKillsDescendants(t *testing.T) {
	s := startShim(t)
	fds, out := stdio(t)
	if err := SendSpec(s.ctl, shSpec("setsid sleep 300 & echo $!; sleep 300"), fds); err != nil {
		t.Fatal(err)
	}
	fds[1].Close()
	if st := s.next(t); st.PID <= 0 {
		t.Fatalf("first status %+v", st)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var orphan int
	if _, err := fmt.Sscan(line, &orphan); err != nil {
		t.Fatalf("pid line %q: %v", line, err)
	}
	if err := s.cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if st := s.next(t); st.Signal != "SIGKILL" || st.Reuse {
		t.Errorf("status %+v, want SIGKILL and no reuse", st)
	}
	if code := s.exit(); code != 0 { // a stopped shim exits, never waits for another command
		t.Errorf("stopped shim exited %d, want 0", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, state, ok := readStat(orphan)
		if !ok || state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the setsid child %d still runs (state %c)", orphan, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReadStatAndDescendants(t *testing.T) {
	ppid, state, ok := readStat(os.Getpid())
	if !ok || ppid != os.Getppid() || state == 0 {
		t.Errorf("readStat(self) = %d %c %v", ppid, state, ok)
	}
	if _, _, ok := readStat(-1); ok {
		t.Error("readStat(-1) succeeded")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := false
	for _, pid := range liveDescendants(os.Getpid()) {
		found = found || pid == cmd.Process.Pid
	}
	if !found {
		t.Errorf("liveDescendants(self) misses child %d", cmd.Process.Pid)
	}
}

// TestSpareThreads: in a fresh process on one P, as a shim is, the
// threads spareThreads starts stay, idle, for the runtime to use instead
// of making new ones.
func TestSpareThreads(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = []string{Env, "PADDOCK_SHIM_TEST_THREADS=4"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var before, after int
	if _, err := fmt.Sscan(string(out), &before, &after); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	// The 4, sysmon, and the thread that runs main.
	if after < 6 || after < before+2 {
		t.Errorf("threads %d before, %d after spareThreads(4); want 4 idle besides sysmon and main's", before, after)
	}
	t.Logf("threads: %d before, %d after", before, after)
}

// spareThreadsChild is the child of TestSpareThreads.
func spareThreadsChild() {
	before := threads()
	spareThreads(4)
	fmt.Println(before, threads())
}

// threads is the process's thread count from /proc/self/status.
func threads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return -1
}

// TestRunByHand: a shim started without the agent's descriptors, or with
// bad arguments, says why and exits 2; --help exits 0.
func TestRunByHand(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "the guest agent starts this program"},
		{[]string{"--status-fd", "0", "--control-fd", "1"}, 2, "not the agent's control socket"},
		{[]string{"bogus"}, 2, `unexpected argument "bogus"`},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--help"}, 0, "Usage: paddock-shim"},
	}
	for _, tt := range tests {
		cmd := exec.Command("/proc/self/exe", append([]string{"shim"}, tt.args...)...)
		cmd.Env = []string{Env}
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tt.code || !strings.Contains(string(out), tt.want) {
			t.Errorf("shim %q: exit %d, output %q; want exit %d and %q", tt.args, code, out, tt.code, tt.want)
		}
	}
}
