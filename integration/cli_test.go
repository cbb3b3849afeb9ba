package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func cli(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	requireDaemon(t)
	t.Helper()
	cmd := exec.Command(filepath.Join(*binDir, "paddock"), args...)
	cmd.Env = append(os.Environ(), "PADDOCK_URL="+shared.url, "PADDOCK_API_KEY="+shared.keys[0])
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return o.String(), e.String(), ee.ExitCode()
		}
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

func TestCLI(t *testing.T) {
	out, errOut, code := cli(t, "", "run", "--", "python3", "-c", "import sys; print('hi'); print('e', file=sys.stderr); sys.exit(3)")
	if out != "hi\n" || errOut != "e\n" || code != 3 {
		t.Fatalf("run: %q %q %d", out, errOut, code)
	}
	id, _, code := cli(t, "", "create", "--meta", "cli=yes")
	id = strings.TrimSpace(id)
	if code != 0 || !strings.HasPrefix(id, "sb") {
		t.Fatalf("create: %q %d", id, code)
	}
	defer cli(t, "", "kill", id)
	src := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(src, []byte("payload\n"), 0o644)
	if _, e, code := cli(t, "", "cp", src, id+":/workspace/in.txt"); code != 0 {
		t.Fatalf("cp to: %s", e)
	}
	out, _, code = cli(t, "", "exec", id, "--", "cat", "in.txt")
	if out != "payload\n" || code != 0 {
		t.Fatalf("exec: %q %d", out, code)
	}
	out, _, _ = cli(t, "", "cp", id+":in.txt", "-")
	if out != "payload\n" {
		t.Fatalf("cp from: %q", out)
	}
	out, _, code = cli(t, "", "ls", "--json", "--meta", "cli=yes")
	var listed []api.Sandbox
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		var wrapped api.ListSandboxesResponse
		if err2 := json.Unmarshal([]byte(out), &wrapped); err2 != nil {
			t.Fatalf("ls --json: %v: %q", err, out)
		}
		listed = wrapped.Sandboxes
	}
	if code != 0 || len(listed) != 1 || listed[0].ID != id {
		t.Fatalf("ls: %q", out)
	}
	out, _, _ = cli(t, "", "ls")
	if !strings.Contains(out, "ID") || !strings.Contains(out, id) {
		t.Fatalf("ls table: %q", out)
	}
	// stop keeps the files; start without a command boots the sandbox.
	if out, e, code := cli(t, "", "stop", "--keep-for", "1h", id); code != 0 || !strings.Contains(out, id+" stopped") {
		t.Fatalf("stop: %q %q %d", out, e, code)
	}
	if out, e, code := cli(t, "", "start", id); code != 0 || !strings.Contains(out, id+" running") {
		t.Fatalf("start: %q %q %d", out, e, code)
	}
	if out, _, code := cli(t, "", "exec", id, "--", "cat", "in.txt"); out != "payload\n" || code != 0 {
		t.Fatalf("exec after stop and start: %q %d", out, code)
	}
	if out, e, code := cli(t, "", "pause", "--keep-for", "10m", id); code != 0 || !strings.Contains(out, id+" paused") {
		t.Fatalf("pause --keep-for: %q %q %d", out, e, code)
	}
	if _, _, code := cli(t, "", "resume", id); code != 0 {
		t.Fatalf("resume: %d", code)
	}
	_, errOut, code = cli(t, "", "get", "sbdoesnotexist")
	if code != 1 || !strings.HasPrefix(errOut, "paddock: ") || strings.Contains(errOut, "goroutine") {
		t.Fatalf("get missing: %q %d", errOut, code)
	}
}
