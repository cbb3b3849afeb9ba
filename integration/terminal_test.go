package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// readUntil reads t's output into out until it contains want.
func readUntil(t *testing.T, term *client.Terminal, out *bytes.Buffer, want string) {
	t.Helper()
	buf := make([]byte, 4096)
	for !strings.Contains(out.String(), want) {
		n, err := term.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			t.Fatalf("waiting for %q: %v; output %q", want, err, out.String())
		}
	}
}

func TestTerminal(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)

	t.Run("bash: prompt, keys, resize, exit code", func(t *testing.T) {
		term, err := sb.OpenPTY(ctx, client.PTYOptions{
			Argv: []string{"bash", "--norc", "--noprofile", "-i"},
			Env:  map[string]string{"PS1": "paddock$ "}, Cols: 80, Rows: 24,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		if term.ID == "" || term.PID <= 1 {
			t.Fatalf("terminal %q pid %d", term.ID, term.PID)
		}
		var out bytes.Buffer
		readUntil(t, term, &out, "paddock$ ")
		term.Write([]byte("echo $((6*7)); tty; stty size\n"))
		readUntil(t, term, &out, "24 80")
		if !strings.Contains(out.String(), "42") || !strings.Contains(out.String(), "/dev/pts/") {
			t.Fatalf("output %q", out.String())
		}
		if err := term.Resize(ctx, 120, 40); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		term.Write([]byte("stty size\n"))
		readUntil(t, term, &out, "40 120")
		// Ctrl-C must reach sleep, not bash: sent while bash is still
		// starting the job it would go to bash, which may then drop the
		// typed-ahead "exit 3" (as in any terminal). So wait until sleep
		// is the terminal's foreground job, then wait for the new prompt.
		term.Write([]byte("sleep 100\n"))
		waitForeground(t, ctx, sb, "sleep")
		out.Reset()
		term.Write([]byte{3})
		readUntil(t, term, &out, "paddock$ ")
		term.Write([]byte("exit 3\n"))
		m, err := term.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if m == nil || m.ExitCode == nil || *m.ExitCode != 3 {
			t.Fatalf("exit %+v, want code 3", m)
		}
	})

	t.Run("several terminals, list, kill, close", func(t *testing.T) {
		var terms []*client.Terminal
		for _, word := range []string{"alpha", "beta", "gamma"} {
			term, err := sb.OpenPTY(ctx, client.PTYOptions{Command: "echo " + word + "; exec sleep 1000"})
			if err != nil {
				t.Fatal(err)
			}
			defer term.Close()
			var out bytes.Buffer
			readUntil(t, term, &out, word)
			terms = append(terms, term)
		}
		list, err := sb.PTYs(ctx)
		if err != nil || len(list) != 3 {
			t.Fatalf("list %+v %v", list, err)
		}
		if err := sb.KillPTY(ctx, terms[0].ID); err != nil {
			t.Fatal(err)
		}
		m, err := terms[0].Wait()
		if err != nil || m == nil || m.Signal == nil || *m.Signal != "SIGKILL" {
			t.Fatalf("killed terminal: %+v %v", m, err)
		}
		terms[1].Close() // closing the socket kills the command
		waitPTYs(t, ctx, sb, 1)
		if err := sb.KillPTY(ctx, "t_999999"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("kill unknown: %v", err)
		}
	})

	t.Run("errors before the upgrade", func(t *testing.T) {
		cases := []struct {
			name string
			opts client.PTYOptions
			want error
		}{
			{"missing cwd", client.PTYOptions{Cwd: "/nonexistent"}, client.ErrBadRequest},
			{"unknown program", client.PTYOptions{Argv: []string{"no-such-program"}}, client.ErrBadRequest},
			{"too wide", client.PTYOptions{Cols: 5000}, client.ErrBadRequest},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := sb.OpenPTY(ctx, tc.opts)
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
			})
		}
		if _, err := shared.client(1).Sandbox(sb.ID).OpenPTY(ctx, client.PTYOptions{}); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("another key's sandbox: %v", err)
		}
	})
}

// waitForeground waits until a process named comm is the foreground job of
// its terminal (its process group is the terminal's).
func waitForeground(t *testing.T, ctx context.Context, sb *client.Sandbox, comm string) {
	t.Helper()
	const script = `import glob, sys
for f in glob.glob("/proc/[0-9]*/stat"):
    try:
        s = open(f).read()
    except OSError:
        continue
    r = s[s.rindex(")") + 2:].split()
    if s[s.index("(") + 1:s.rindex(")")] == sys.argv[1] and r[2] == r[5]:
        print("foreground")
`
	for {
		res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", script, comm}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Stdout, "foreground") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never became the foreground job", comm)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waitPTYs(t *testing.T, ctx context.Context, sb *client.Sandbox, n int) {
	t.Helper()
	for {
		list, err := sb.PTYs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still %d terminals, want %d", len(list), n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestTerminalLimit(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	for i := 0; i < 16; i++ {
		term, err := sb.OpenPTY(ctx, client.PTYOptions{Argv: []string{"sleep", "1000"}})
		if err != nil {
			t.Fatalf("terminal %d: %v", i, err)
		}
		defer term.Close()
	}
	if _, err := sb.OpenPTY(ctx, client.PTYOptions{Argv: []string{"sleep", "1"}}); !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("17th terminal: %v, want limit_exceeded", err)
	}
	// Output is paced by the reader: a flood reaches the client in full,
	// in bounded messages, and the exit status follows.
	sb2 := newSandbox(t, nil)
	term, err := sb2.OpenPTY(ctx, client.PTYOptions{Command: "head -c 3000000 /dev/zero | tr '\\0' x; exit 5"})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	n, err := io.Copy(io.Discard, term)
	if err != nil || n < 3000000 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if m := term.Exit(); m == nil || m.ExitCode == nil || *m.ExitCode != 5 {
		t.Fatalf("exit %+v", m)
	}
}
