// Package backendtest is the conformance suite of sandbox.Backend (the
// pattern of litestream's replica client tests): Run checks the contract
// every backend must keep, and the optional capabilities (Pauser, Meter,
// Updater) that a backend implements.
//
// It runs against the in-memory fake anywhere:
//
//	go test ./internal/backend/backendtest/
//
// and against the OCI container backend, which needs root, mkfs.ext4 and
// the built paddock-agent and runc (make build):
//
//	go test ./internal/backend/backendtest/ -backend=container [-paddock.bin=DIR]
//
// -backend=all runs both. The container backend's own tests also run the
// suite (as root, with the binaries in bin/); without root or binaries
// they skip and say why.
package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Harness tells Run how to drive one backend implementation.
type Harness struct {
	// New returns a backend over an empty host; it is closed by the test's
	// cleanups.
	New func(t *testing.T) sandbox.Backend
	// Restart returns a new backend over the same host as b, as a daemon
	// restart does (b is not used again). Nil skips the recovery subtests.
	Restart func(t *testing.T, b sandbox.Backend) sandbox.Backend
	// Kill kills every process of sandbox id behind the backend's back, as
	// a crash or an OOM kill of its init does. Nil skips the subtests that
	// need it.
	Kill func(t *testing.T, b sandbox.Backend, id string)
	// Unavailable, if set, says why the backend cannot run on this host
	// ("" when it can); Run then skips the whole suite with that reason.
	Unavailable func() string
}

// Deadline bounds every wait of the suite (agent answers, a killed
// sandbox being seen dead). It is generous: no subtest asserts durations.
const Deadline = 60 * time.Second

type subtest struct {
	name  string
	needs string // "", "pauser", "stopper", "pauser+stopper", "meter", "updater", "kill", "restart"
	run   func(t *testing.T, h Harness, b sandbox.Backend)
}

// subtests is the suite, in order.
func subtests() []subtest {
	return []subtest{
		{"TemplatesIncludeBase", "", testTemplates},
		{"CreateRunsAgent", "", testCreate},
		{"DestroyIsIdempotent", "", testDestroyIdempotent},
		{"DestroyUnknown", "", testDestroyUnknown},
		{"UnknownID", "", testUnknownID},
		{"InvalidID", "", testInvalidID},
		{"UnknownTemplateLeavesNothing", "", testUnknownTemplate},
		{"DuplicateIDConflicts", "", testDuplicate},
		{"CancelledCreateRollsBack", "", testCancelledCreate},
		{"ConcurrentCreates", "", testConcurrent},
		{"PauseResume", "pauser", testPauseResume},
		{"DestroyPaused", "pauser", testDestroyPaused},
		{"StopKeepsFilesStartBoots", "stopper", testStopStart},
		{"StopPaused", "pauser+stopper", testStopPaused},
		{"StatsOfRunning", "meter", testStats},
		{"UpdateLimits", "updater", testUpdate},
		{"DeadSandboxStaysListed", "kill", testDead},
		{"RestartRefindsSandboxes", "restart", testRestart},
	}
}

// Run runs the conformance suite against the backends h makes.
func Run(t *testing.T, h Harness) {
	if h.Unavailable != nil {
		if why := h.Unavailable(); why != "" {
			t.Skip(why)
		}
	}
	for _, st := range subtests() {
		t.Run(st.name, func(t *testing.T) {
			b := h.New(t)
			if reason := missing(st.needs, h, b); reason != "" {
				t.Skip(reason)
			}
			st.run(t, h, b)
		})
	}
}

// missing says why a subtest cannot run on b, or "".
func missing(needs string, h Harness, b sandbox.Backend) string {
	var ok bool
	switch needs {
	case "":
		return ""
	case "pauser":
		_, ok = b.(sandbox.Pauser)
	case "stopper":
		_, ok = b.(sandbox.Stopper)
	case "pauser+stopper":
		_, ok = b.(sandbox.Stopper)
		_, ok2 := b.(sandbox.Pauser)
		ok = ok && ok2
	case "meter":
		_, ok = b.(sandbox.Meter)
	case "updater":
		_, ok = b.(sandbox.Updater)
	case "kill":
		ok = h.Kill != nil
	case "restart":
		ok = h.Kill != nil && h.Restart != nil
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("the backend (or its harness) has no %s capability", needs)
}

// newID returns a fresh valid sandbox id.
func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "ct" + hex.EncodeToString(b)
}

// spec is a small sandbox of the base template.
func spec(id string) sandbox.Spec {
	return sandbox.Spec{ID: id, Template: "base",
		Resources: sandbox.Resources{VCPUs: 1, MemoryMiB: 256, DiskMiB: 64, PIDs: 128},
		Env:       map[string]string{"CONFORMANCE_VAR": "one two"}}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), Deadline)
	t.Cleanup(cancel)
	return c
}

// create creates a sandbox and destroys it when the test ends.
func create(t *testing.T, b sandbox.Backend) string {
	t.Helper()
	id := newID()
	info, err := b.Create(ctx(t), spec(id))
	if err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	if info.ID != id || info.Runtime == "" {
		t.Errorf("Create: Info = %+v, want ID %s and a runtime name", info, id)
	}
	return id
}

// agentClient reaches sandbox id's agent through b.Dial.
func agentClient(b sandbox.Backend, id string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return b.Dial(ctx, id)
		},
		DisableKeepAlives: true,
	}}
}

// healthy fails the test unless the agent of id answers GET /health.
func healthy(t *testing.T, b sandbox.Backend, id string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, "http://agent/health", nil)
	resp, err := agentClient(b, id).Do(req)
	if err != nil {
		t.Fatalf("agent of %s: %v", id, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("agent of %s: health answered %s", id, resp.Status)
	}
}

// execIn runs argv in sandbox id through its agent.
func execIn(t *testing.T, b sandbox.Backend, id string, argv ...string) api.ExecResult {
	t.Helper()
	body, _ := json.Marshal(api.ExecRequest{Argv: argv, TimeoutSeconds: 30})
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, "http://agent/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := agentClient(b, id).Do(req)
	if err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	defer resp.Body.Close()
	var res api.ExecResult
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("exec in %s: %s: %s", id, resp.Status, e.Error.Message)
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatalf("exec in %s: %v", id, err)
	}
	return res
}

func listed(t *testing.T, b sandbox.Backend, id string) bool {
	t.Helper()
	ids, err := b.List(ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return slices.Contains(ids, id)
}

func alive(t *testing.T, b sandbox.Backend, id string) bool {
	t.Helper()
	ok, err := b.Alive(ctx(t), id)
	if err != nil {
		t.Fatalf("Alive(%s): %v", id, err)
	}
	return ok
}

// eventually polls cond until it holds or Deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: %s", Deadline, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone fails the test unless id left no trace the backend reports.
func gone(t *testing.T, b sandbox.Backend, id string) {
	t.Helper()
	if alive(t, b, id) {
		t.Errorf("Alive(%s) = true after it was removed", id)
	}
	if listed(t, b, id) {
		t.Errorf("List still has %s after it was removed", id)
	}
}

// isAny reports whether err is one of targets.
func isAny(err error, targets ...error) bool {
	for _, e := range targets {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
