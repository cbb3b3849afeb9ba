package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// TestTemplateRuntimeGVisor: a config template with "runtime": "runsc"
// runs its sandboxes under gVisor next to runc's on the same daemon, end
// to end through the API: exec, files, a background process. It needs the
// runsc that `make runsc-test` builds (bin/runsc); without it, it skips.
func TestTemplateRuntimeGVisor(t *testing.T) {
	requireDaemon(t)
	runsc := filepath.Join(*binDir, "runsc")
	if _, err := os.Stat(runsc); err != nil {
		t.Skipf("no %s (make runsc-test builds it)", runsc)
	}
	cfg, _ := json.Marshal(map[string]any{
		"runtimes":  map[string]string{"runsc": runsc},
		"templates": map[string]any{"base-gvisor": map[string]string{"runtime": "runsc"}},
	})
	d, err := startDaemon(daemonOptions{config: string(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	ctx := ctxT(t)
	gv := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{Template: "base-gvisor"})
	rc := newSandboxOn(t, d, 0, &api.CreateSandboxRequest{})
	kernel := func(res *api.ExecResult) bool { return strings.Contains(res.Stdout, "gVisor") }
	if res := advExec(t, gv, "dmesg 2>&1 | head -3", 30); !kernel(res) {
		t.Fatalf("template base-gvisor does not run under gVisor: %+v", res)
	}
	if res := advExec(t, rc, "dmesg 2>&1 | head -3", 30); kernel(res) {
		t.Fatalf("template base runs under gVisor: %+v", res)
	}
	if _, err := gv.Files().Write(ctx, "hello.txt", []byte("from gvisor"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := advExec(t, gv, "cat hello.txt; echo; id -u", 30); res.Stdout != "from gvisor\n0\n" {
		t.Fatalf("files under gVisor: %+v", res)
	}
	p, err := gv.Start(ctx, api.ExecRequest{Command: "sleep 0.2; echo bg"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.Wait(ctx, time.Minute)
	if err != nil || w.Result == nil || w.Result.ExitCode == nil || *w.Result.ExitCode != 0 {
		t.Fatalf("background process under gVisor: %+v, %v", w, err)
	}
}
