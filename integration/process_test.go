package integration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

func TestBackgroundProcesses(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, nil)
	t.Run("stdin, output re-attach, wait", func(t *testing.T) {
		p, err := sb.Start(ctx, api.ExecRequest{
			Argv:          []string{"python3", "-c", "import sys\nfor l in sys.stdin: print(l.strip().upper(), flush=True)\nprint('bye')"},
			KeepStdinOpen: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.State != api.ProcessRunning || p.PID <= 1 {
			t.Fatalf("started: %+v", p.Process)
		}
		if err := p.WriteStdin(ctx, []byte("hello\n"), false); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for ev, err := range p.Output(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			out.Write(ev.Data)
			if strings.Contains(out.String(), "HELLO\n") {
				break
			}
		}
		if err := p.WriteStdin(ctx, []byte("world\n"), true); err != nil {
			t.Fatal(err)
		}
		got, err := p.Wait(ctx, 30*time.Second)
		if err != nil || got.State != api.ProcessExited || got.Result == nil || *got.Result.ExitCode != 0 {
			t.Fatalf("wait: %+v %v", got, err)
		}
		if got.Result.Stdout != "HELLO\nWORLD\nbye\n" {
			t.Fatalf("stdout %q", got.Result.Stdout)
		}
		// Re-attaching after the end replays everything and ends with exit.
		var replay bytes.Buffer
		var last string
		for ev, err := range p.Output(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			replay.Write(ev.Data)
			last = ev.Type
		}
		if replay.String() != "HELLO\nWORLD\nbye\n" || last != api.EventExit {
			t.Fatalf("replay %q last %s", replay.String(), last)
		}
	})
	t.Run("list and kill", func(t *testing.T) {
		p, err := sb.Start(ctx, api.ExecRequest{Command: "sleep 1000 & sleep 1001"})
		if err != nil {
			t.Fatal(err)
		}
		list, err := sb.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, q := range list {
			found = found || q.ID == p.ID
		}
		if !found {
			t.Fatalf("process %s not listed in %+v", p.ID, list)
		}
		if err := p.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := p.Wait(ctx, 10*time.Second)
		if err != nil || got.State != api.ProcessExited || got.Result.Signal == nil || *got.Result.Signal != "SIGKILL" {
			t.Fatalf("after kill: %+v %v", got, err)
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Command: "ps -eo args | grep -c '^sleep 100' || true"})
		if err != nil || res.Stdout != "0\n" {
			t.Fatalf("kill left processes: %q %v", res.Stdout, err)
		}
	})
}
