package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// startAgentProcess runs the test binary as a standalone agent (serve-test)
// and returns a harness for it and its pid.
func startAgentProcess(t testing.TB) (*harness, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "pa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent.sock")
	workdir := t.TempDir()
	cmd := exec.Command(exe, "serve-test", sock, workdir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the agent shuts down
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	h := &harness{t: t, c: agent.NewHTTPClient(sock), workdir: workdir}
	h.waitHealthy()
	return h, cmd.Process.Pid
}

// statusMiB reads a VmXXX: field of /proc/pid/status in MiB.
func statusMiB(t *testing.T, pid int, key string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}

// TestAgentMemoryBounded prints 100 MiB under a 16 MiB cap through the
// JSON and the NDJSON exec answers and checks that the agent's peak RSS
// grows by no more than the cap plus a constant (memSlackMiB).
func TestAgentMemoryBounded(t *testing.T) {
	const capBytes = 16 << 20
	h, pid := startAgentProcess(t)
	// Warm up: the first exec starts what later ones reuse.
	h.exec(api.ExecRequest{Argv: []string{"true"}})
	before := statusMiB(t, pid, "VmHWM")
	req := api.ExecRequest{Command: "head -c 104857600 /dev/zero | tr '\\0' 'a'", MaxOutputBytes: capBytes, TimeoutSeconds: 120}
	res := h.exec(req)
	if !res.StdoutTruncated || res.StdoutBytes != 100<<20 || len(res.Stdout) != capBytes {
		t.Fatalf("json: truncated %v, %d bytes printed, %d kept", res.StdoutTruncated, res.StdoutBytes, len(res.Stdout))
	}
	afterJSON := statusMiB(t, pid, "VmHWM")
	var kept int
	h.stream(context.Background(), http.MethodPost, "/exec", req, func(ev api.Event) {
		kept += len(ev.Data)
	})
	if kept != capBytes {
		t.Fatalf("ndjson: %d bytes kept", kept)
	}
	peak := statusMiB(t, pid, "VmHWM")
	t.Logf("agent peak RSS %.1f MiB → %.1f MiB after JSON → %.1f MiB after NDJSON (+%.1f MiB) for 100 MiB printed under a 16 MiB cap", before, afterJSON, peak, peak-before)
	if grew := peak - before; grew > capBytes>>20+memSlackMiB {
		t.Errorf("agent peak RSS grew by %.1f MiB, more than the cap (16 MiB) + %d MiB", grew, memSlackMiB)
	}
}

// TestAgentStdinMemoryBounded feeds 16 MiB (the largest stdin) through
// the streaming route and checks that the agent's peak RSS grows by less
// than memSlackMiB: it holds a buffer of the stdin, never all of it. The
// growth of the same stdin in a JSON body (POST /exec) is logged.
func TestAgentStdinMemoryBounded(t *testing.T) {
	const size = 16 << 20
	stdin := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	h, pid := startAgentProcess(t)
	h.exec(api.ExecRequest{Argv: []string{"true"}}) // warm up
	before := statusMiB(t, pid, "VmHWM")
	head, _ := json.Marshal(api.ExecRequest{Argv: []string{"wc", "-c"}})
	body := io.MultiReader(bytes.NewReader(append(head, '\n')), bytes.NewReader(stdin))
	resp, err := h.c.Post("http://agent"+agent.ExecStdinPath, "application/octet-stream", body)
	if err != nil {
		t.Fatal(err)
	}
	var res api.ExecResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || res.Stdout != "16777216\n" {
		t.Fatalf("%d %+v %v", resp.StatusCode, res, err)
	}
	streamed := statusMiB(t, pid, "VmHWM")
	if res := h.exec(api.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: string(stdin)}); res.Stdout != "16777216\n" {
		t.Fatalf("json: %+v", res)
	}
	jsonPeak := statusMiB(t, pid, "VmHWM")
	t.Logf("agent peak RSS %.1f MiB → %.1f MiB with 16 MiB of stdin streamed (+%.1f MiB) → %.1f MiB with it in a JSON body (+%.1f MiB more)",
		before, streamed, streamed-before, jsonPeak, jsonPeak-streamed)
	if grew := streamed - before; grew > memSlackMiB {
		t.Errorf("agent peak RSS grew by %.1f MiB for a streamed stdin, more than %d MiB", grew, memSlackMiB)
	}
}
