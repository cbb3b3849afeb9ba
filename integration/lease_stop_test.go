package integration

import (
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// TestLeaseEndStopAccepted creates a sandbox with on_timeout "stop" (the
// lease-end action programs from hosted SDKs ask for): it is accepted,
// reported back, and at the end of the lease the sandbox's processes end.
func TestLeaseEndStopAccepted(t *testing.T) {
	sb := newSandbox(t, &api.CreateSandboxRequest{TimeoutSeconds: 1, OnTimeout: api.OnTimeoutStop})
	if sb.OnTimeout != api.OnTimeoutStop {
		t.Fatalf("on_timeout %q, want stop", sb.OnTimeout)
	}
	c := shared.client(0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := c.Get(ctxT(t), sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.State != api.StateRunning && cur.State != api.StateCreating {
			if cur.State == api.StatePaused {
				t.Fatalf("a stopped sandbox must not be paused: %+v", cur)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after its lease", cur.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := sb.Exec(ctxT(t), api.ExecRequest{Command: "true"}); err == nil {
		t.Fatal("exec in a sandbox whose lease ended with stop succeeded")
	}
}
