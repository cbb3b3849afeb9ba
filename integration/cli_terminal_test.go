package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// TestCLITerminal drives `paddock shell` on a real terminal (tmux, as a
// person would: keys in, screen out, window resized) and `paddock exec -it`
// with a pipe for stdin.
func TestCLITerminal(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)

	out, _, code := cli(t, "echo from-stdin\nexit 3\n", "exec", "-it", sb.ID, "--", "sh")
	if code != 3 || !strings.Contains(out, "from-stdin") {
		t.Fatalf("exec -it: code %d, output %q", code, out)
	}

	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed (scripts/deps.sh installs it)")
	}
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tm := func(args ...string) string {
		t.Helper()
		b, err := exec.CommandContext(ctx, tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v %s", args, err, b)
		}
		return string(b)
	}
	shell := "PADDOCK_URL=" + shared.url + " PADDOCK_API_KEY=" + shared.keys[0] + " " +
		filepath.Join(*binDir, "paddock") + " shell " + sb.ID + "; echo EXIT=$?; sleep 600"
	tm("new-session", "-d", "-x", "100", "-y", "30", "-s", "pd", shell)
	defer exec.Command(tmux, "-S", sock, "kill-server").Run()
	screen := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s := tm("capture-pane", "-p", "-t", "pd")
			if strings.Contains(s, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("screen never showed %q:\n%s", want, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tm("send-keys", "-t", "pd", "stty size; echo $TERM", "Enter")
	screen("30 100")
	tm("resize-window", "-t", "pd", "-x", "120", "-y", "40")
	tm("send-keys", "-t", "pd", "clear; stty size", "Enter")
	screen("40 120")
	tm("send-keys", "-t", "pd", "exit 7", "Enter")
	screen("EXIT=7")
}

// TestCLIWatch runs `paddock watch --json` and changes files until it
// reports them.
func TestCLIWatch(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "mkdir -p cw"}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(*binDir, "paddock"), "watch", "--json", sb.ID, "cw")
	cmd.Env = append(os.Environ(), "PADDOCK_URL="+shared.url, "PADDOCK_API_KEY="+shared.keys[0])
	var mu sync.Mutex
	var out bytes.Buffer
	cmd.Stdout = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The CLI's watch may not be in place yet: touch until a line comes.
	for i := 0; ; i++ {
		if _, err := sb.Exec(ctx, api.ExecRequest{Command: "touch cw/f" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := out.String()
		mu.Unlock()
		if line, _, ok := strings.Cut(got, "\n"); ok {
			var ev api.WatchEvent
			if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type != api.WatchCreate || !strings.HasPrefix(ev.Path, "/workspace/cw/f") {
				t.Fatalf("watch line %q: %v", line, err)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("paddock watch printed nothing")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() != 130 && ee.ExitCode() != 0 {
			t.Fatalf("paddock watch after SIGINT: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("paddock watch did not end on SIGINT")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
