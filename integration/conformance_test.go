package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestConformance is the suite every runtime must pass (run with runc by
// default and with PADDOCK_TEST_RUNTIME=crun): exec semantics, files and
// isolation basics, through the Go SDK against a real paddockd.
func TestConformance(t *testing.T) {
	sb := newSandbox(t, nil)
	ctx := ctxT(t)
	if sb.State != api.StateRunning || sb.Template != "base" || sb.Runtime != runtimeName() {
		t.Fatalf("created sandbox: state %q template %q runtime %q", sb.State, sb.Template, sb.Runtime)
	}

	t.Run("python file", func(t *testing.T) {
		code := "import sys\nprint(sum(range(10)))\nprint('warn', file=sys.stderr)\n"
		if _, err := sb.Files().Write(ctx, "main.py", []byte(code), 0); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "main.py"}})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, res, 0, "45\n", "warn\n")
	})

	execCases := []struct {
		name           string
		req            api.ExecRequest
		code           int
		stdout, stderr string
	}{
		{"argv", api.ExecRequest{Argv: []string{"echo", "a b", "$HOME"}}, 0, "a b $HOME\n", ""},
		{"shell", api.ExecRequest{Command: "echo $HOME | tr a-z A-Z; exit 3"}, 3, "/ROOT\n", ""},
		{"stdin", api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: "hello"}, 0, "5\n", ""},
		{"stdin base64", api.ExecRequest{Command: "od -An -tx1", StdinBase64: "AP8="}, 0, " 00 ff\n", ""},
		{"non-zero exit", api.ExecRequest{Command: "echo oops >&2; false"}, 1, "", "oops\n"},
		{"traceback", api.ExecRequest{Argv: []string{"python3", "-c", "1/0"}}, 1, "", "*ZeroDivisionError*"},
		{"env and cwd", api.ExecRequest{Command: "echo $FOO; pwd", Env: map[string]string{"FOO": "bar"}, Cwd: "/tmp"}, 0, "bar\n/tmp\n", ""},
		{"relative cwd", api.ExecRequest{Command: "mkdir -p sub && cd sub && pwd"}, 0, "/workspace/sub\n", ""},
		{"hostname and user", api.ExecRequest{Command: "hostname; id -u"}, 0, "sandbox\n0\n", ""},
		{"tools", api.ExecRequest{Command: "node -e 'console.log(6*7)' && echo 'int main(){return 0;}' > /tmp/t.c && gcc /tmp/t.c -o /tmp/t && /tmp/t && git --version >/dev/null && echo ok"}, 0, "42\nok\n", ""},
		{"pip user dir writable", api.ExecRequest{Command: "python3 -m site --user-site >/dev/null && mkdir -p $(python3 -m site --user-site) && echo ok"}, 0, "ok\n", ""},
	}
	for _, c := range execCases {
		t.Run(c.name, func(t *testing.T) {
			res, err := sb.Exec(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			wantResult(t, res, c.code, c.stdout, c.stderr)
		})
	}

	t.Run("timeout kills setsid and double-forked descendants", func(t *testing.T) {
		res, err := sb.Exec(ctx, api.ExecRequest{
			Command:        "setsid sleep 1000 & (sleep 1001 &) ; setsid sh -c 'sleep 1002 & wait' & sleep 1003",
			TimeoutSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != nil || res.Signal == nil || *res.Signal != "SIGKILL" {
			t.Fatalf("want timed_out with SIGKILL, got %+v", res)
		}
		res, err = sb.Exec(ctx, api.ExecRequest{Command: "ps -eo args | grep -c '^sleep 10' || true"})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, res, 0, "0\n", "")
	})

	t.Run("output capped at max_output_bytes", func(t *testing.T) {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "head -c 5000000 /dev/zero | tr '\\0' x; head -c 70000 /dev/zero >&2"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Stdout) != 65536 || !res.StdoutTruncated || res.StdoutBytes != 5000000 {
			t.Fatalf("stdout: len %d truncated %v bytes %d", len(res.Stdout), res.StdoutTruncated, res.StdoutBytes)
		}
		if !res.StderrTruncated || res.StderrBytes != 70000 || *res.ExitCode != 0 {
			t.Fatalf("stderr: %+v", res)
		}
		res, err = sb.Exec(ctx, api.ExecRequest{Command: "head -c 1000000 /dev/zero", MaxOutputBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Stdout) != 1000000 || res.StdoutTruncated {
			t.Fatalf("raised cap: len %d truncated %v", len(res.Stdout), res.StdoutTruncated)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		var types []string
		var out []byte
		var exit *api.Event
		for ev, err := range sb.ExecStream(ctx, api.ExecRequest{Command: "printf 'a\\0b'; sleep 0.2; echo err >&2; exit 7"}) {
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, ev.Type)
			if ev.Type == api.EventStdout {
				out = append(out, ev.Data...)
			}
			if ev.Type == api.EventExit {
				e := ev
				exit = &e
			}
		}
		if types[0] != api.EventStart || types[len(types)-1] != api.EventExit {
			t.Fatalf("event order %v", types)
		}
		if !bytes.Equal(out, []byte("a\x00b")) || exit.ExecResult == nil || *exit.ExitCode != 7 {
			t.Fatalf("stream out %q exit %+v", out, exit)
		}
	})

	t.Run("files persist and round-trip binary", func(t *testing.T) {
		data := make([]byte, 3<<20)
		rand.Read(data)
		if _, err := sb.Files().Write(ctx, "/workspace/data/blob.bin", data, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "stat -c '%s %a' data/blob.bin && cp data/blob.bin /tmp/copy.bin"})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, res, 0, fmt.Sprintf("%d 600\n", len(data)), "")
		got, err := sb.Files().Read(ctx, "/tmp/copy.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back: %d bytes, err %v", len(got), err)
		}
		ents, err := sb.Files().List(ctx, "data", 1)
		if err != nil || len(ents) != 1 || ents[0].Name != "blob.bin" || ents[0].Size != int64(len(data)) || ents[0].Path != "/workspace/data/blob.bin" {
			t.Fatalf("list: %+v %v", ents, err)
		}
		if err := sb.Files().Remove(ctx, "data", true); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Files().Read(ctx, "data/blob.bin"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("read after remove: %v", err)
		}
	})

	t.Run("symlinks resolve inside the sandbox", func(t *testing.T) {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "ln -sf /etc/shadow shadow; ln -sf ../../../../../../etc/passwd up; ln -sfn / rootlink; echo ok"})
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, res, 0, "ok\n", "")
		if _, err := sb.Files().Read(ctx, "shadow"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("shadow via symlink: %v (host /etc/shadow must not be reachable)", err)
		}
		for _, p := range []string{"up", "../../../../etc/passwd", "rootlink/etc/passwd"} {
			got, err := sb.Files().Read(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(got), "root:x:0:0:root:/root:/bin/bash\nuser:") {
				t.Fatalf("%s read a passwd that is not the sandbox's: %q", p, got)
			}
		}
		if _, err := sb.Files().Write(ctx, "rootlink/etc/evil", []byte("x"), 0); err != nil {
			t.Fatalf("write through symlink inside sandbox: %v", err)
		}
	})

	t.Run("isolation basics", func(t *testing.T) {
		res, err := sb.Exec(ctx, api.ExecRequest{Command: `
			awk '{print $2}' /proc/self/uid_map
			ls /home /root | tr '\n' ' '; echo
			test -e /etc/shadow && echo shadow-visible
			grep -c NoNewPrivs:.1 /proc/self/status
			grep Seccomp: /proc/self/status | awk '{print $2}'
			ip -o link | wc -l
			cat /proc/1/cmdline | tr '\0' ' '; echo`})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(res.Stdout, "\n")
		if len(lines) < 6 || lines[0] == "0" {
			t.Fatalf("uid 0 maps to host root or output unexpected: %q / %q", res.Stdout, res.Stderr)
		}
		if strings.Contains(res.Stdout, "shadow-visible") || lines[2] != "1" || lines[3] != "2" || lines[4] != "1" {
			t.Fatalf("isolation output: %q", res.Stdout)
		}
		if !strings.Contains(lines[5], "paddock-agent serve") {
			t.Fatalf("PID 1 is %q, want the agent", lines[5])
		}
	})
}

// wantResult checks an exec result; a want string of the form "*x*" means
// "contains x".
func wantResult(t *testing.T, res *api.ExecResult, code int, stdout, stderr string) {
	t.Helper()
	if res.ExitCode == nil || *res.ExitCode != code {
		t.Errorf("exit code %v (signal %v, timed out %v), want %d; stderr %q", ptr(res.ExitCode), ptr(res.Signal), res.TimedOut, code, res.Stderr)
	}
	match := func(name, got, want string) {
		if strings.HasPrefix(want, "*") && strings.HasSuffix(want, "*") && len(want) > 1 {
			if !strings.Contains(got, strings.Trim(want, "*")) {
				t.Errorf("%s %q does not contain %q", name, got, strings.Trim(want, "*"))
			}
		} else if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	match("stdout", res.Stdout, stdout)
	match("stderr", res.Stderr, stderr)
}

func ptr[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

var _ = time.Second
