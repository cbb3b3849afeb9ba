package backendtest

import (
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// testStopStart: a stopped sandbox has no processes but stays listed (its
// files are its traces); Stop is idempotent; Start boots it again with the
// files it wrote; Destroy then removes everything.
func testStopStart(t *testing.T, h Harness, b sandbox.Backend) {
	st := b.(sandbox.Stopper)
	id := create(t, b)
	if r := execIn(t, b, id, "sh", "-c", "echo kept > kept.txt"); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("write: %+v", r)
	}
	if err := st.Stop(ctx(t), id); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if alive(t, b, id) || !listed(t, b, id) {
		t.Errorf("a stopped sandbox must be dead but listed")
	}
	if err := st.Stop(ctx(t), id); err != nil {
		t.Errorf("Stop of a stopped sandbox: %v", err)
	}
	if _, err := st.Start(ctx(t), spec(id)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	healthy(t, b, id)
	if r := execIn(t, b, id, "cat", "kept.txt"); r.Stdout != "kept\n" {
		t.Errorf("file after stop and start: %+v", r)
	}
	if err := b.Destroy(ctx(t), id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	gone(t, b, id)
}

// testStopPaused: a paused sandbox can be stopped (its frozen processes
// end) and started again.
func testStopPaused(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	if err := b.(sandbox.Pauser).Pause(ctx(t), id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	st := b.(sandbox.Stopper)
	if err := st.Stop(ctx(t), id); err != nil {
		t.Fatalf("Stop of a paused sandbox: %v", err)
	}
	if alive(t, b, id) {
		t.Errorf("a stopped sandbox is alive")
	}
	if _, err := st.Start(ctx(t), spec(id)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	healthy(t, b, id)
}
