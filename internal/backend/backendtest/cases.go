package backendtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func testTemplates(t *testing.T, h Harness, b sandbox.Backend) {
	if tpls := b.Templates(); !slices.Contains(tpls, "base") {
		t.Errorf("Templates() = %v, want it to include base", tpls)
	}
}

// testCreate: a created sandbox is alive, listed, its agent answers and
// its processes see Spec.Env.
func testCreate(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	if !alive(t, b, id) {
		t.Errorf("Alive(%s) = false right after Create", id)
	}
	if !listed(t, b, id) {
		t.Errorf("List misses %s", id)
	}
	healthy(t, b, id)
	res := execIn(t, b, id, "sh", "-c", `printf %s "$CONFORMANCE_VAR"`)
	if res.ExitCode == nil || *res.ExitCode != 0 || res.Stdout != "one two" {
		t.Errorf("exec: exit %v stdout %q stderr %q, want exit 0 and Spec.Env's value", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func testDestroyIdempotent(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	for i := range 2 {
		if err := b.Destroy(ctx(t), id); err != nil {
			t.Fatalf("Destroy #%d: %v", i+1, err)
		}
	}
	gone(t, b, id)
	if c, err := b.Dial(ctx(t), id); err == nil {
		c.Close()
		t.Errorf("Dial of a destroyed sandbox succeeded")
	}
}

func testDestroyUnknown(t *testing.T, h Harness, b sandbox.Backend) {
	if err := b.Destroy(ctx(t), newID()); err != nil {
		t.Errorf("Destroy of an unknown id: %v, want nil", err)
	}
}

// testUnknownID: every call about an id the backend never made says so.
func testUnknownID(t *testing.T, h Harness, b sandbox.Backend) {
	id := newID()
	if ok, err := b.Alive(ctx(t), id); ok || err != nil {
		t.Errorf("Alive(unknown) = %v, %v; want false, nil", ok, err)
	}
	if c, err := b.Dial(ctx(t), id); err == nil {
		c.Close()
		t.Errorf("Dial(unknown) succeeded")
	} else if !isAny(err, sandbox.ErrNotFound, sandbox.ErrUnavailable) {
		t.Errorf("Dial(unknown): %v, want ErrNotFound or ErrUnavailable", err)
	}
	if p, ok := b.(sandbox.Pauser); ok {
		if err := p.Pause(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Pause(unknown): %v, want ErrNotFound", err)
		}
		if err := p.Resume(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Resume(unknown): %v, want ErrNotFound", err)
		}
	}
	if m, ok := b.(sandbox.Meter); ok {
		if _, err := m.Stats(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Stats(unknown): %v, want ErrNotFound", err)
		}
	}
	if u, ok := b.(sandbox.Updater); ok {
		if err := u.Update(ctx(t), id, spec(id).Resources); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Update(unknown): %v, want ErrNotFound", err)
		}
	}
}

// testInvalidID: ids become host paths, so anything but a plain name is
// refused before it touches the host.
func testInvalidID(t *testing.T, h Harness, b sandbox.Backend) {
	for _, id := range []string{"", "../escape", "a/b", "UPPER", ".hidden", "sp ace"} {
		if _, err := b.Create(ctx(t), spec(id)); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("Create(%q): %v, want ErrInvalid", id, err)
		}
	}
	if err := b.Destroy(ctx(t), "../escape"); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("Destroy(../escape): %v, want ErrInvalid", err)
	}
}

// testUnknownTemplate: a refused create leaves nothing, and the id can be
// used again.
func testUnknownTemplate(t *testing.T, h Harness, b sandbox.Backend) {
	id := newID()
	s := spec(id)
	s.Template = "no-such-template"
	if _, err := b.Create(ctx(t), s); !errors.Is(err, sandbox.ErrUnknownTemplate) {
		t.Fatalf("Create(unknown template): %v, want ErrUnknownTemplate", err)
	}
	gone(t, b, id)
	if _, err := b.Create(ctx(t), spec(id)); err != nil {
		t.Fatalf("Create after a refused create: %v", err)
	}
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	healthy(t, b, id)
}

// testDuplicate: creating an existing id fails with ErrConflict and leaves
// the existing sandbox alone.
func testDuplicate(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	if _, err := b.Create(ctx(t), spec(id)); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("second Create(%s): %v, want ErrConflict", id, err)
	}
	if !alive(t, b, id) || !listed(t, b, id) {
		t.Fatalf("the first %s is gone after a refused second create", id)
	}
	healthy(t, b, id)
}

// testCancelledCreate: a create that fails part way (its context is done)
// rolls back everything it made.
func testCancelledCreate(t *testing.T, h Harness, b sandbox.Backend) {
	id := newID()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Create(c, spec(id)); err == nil {
		b.Destroy(context.Background(), id)
		t.Fatalf("Create with a cancelled context succeeded")
	}
	gone(t, b, id)
	if _, err := b.Create(ctx(t), spec(id)); err != nil {
		t.Fatalf("Create after a rolled-back create: %v", err)
	}
	t.Cleanup(func() { b.Destroy(context.Background(), id) })
	healthy(t, b, id)
}

// testConcurrent: creates and destroys of different ids may overlap.
func testConcurrent(t *testing.T, h Harness, b sandbox.Backend) {
	const n = 3
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = newID()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Create(ctx(t), spec(ids[i]))
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("concurrent Create(%s): %v", id, errs[i])
		}
		t.Cleanup(func() { b.Destroy(context.Background(), id) })
		healthy(t, b, id)
	}
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.Destroy(ctx(t), ids[i])
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if errs[i] != nil {
			t.Errorf("concurrent Destroy(%s): %v", id, errs[i])
		}
		gone(t, b, id)
	}
}

// testPauseResume: a paused sandbox is still alive and listed; once
// resumed its agent answers again.
func testPauseResume(t *testing.T, h Harness, b sandbox.Backend) {
	p := b.(sandbox.Pauser)
	id := create(t, b)
	if err := p.Pause(ctx(t), id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if !alive(t, b, id) || !listed(t, b, id) {
		t.Errorf("a paused sandbox must stay alive and listed")
	}
	if err := p.Resume(ctx(t), id); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	healthy(t, b, id)
}

func testDestroyPaused(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	if err := b.(sandbox.Pauser).Pause(ctx(t), id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := b.Destroy(ctx(t), id); err != nil {
		t.Fatalf("Destroy of a paused sandbox: %v", err)
	}
	gone(t, b, id)
}

func testStats(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	st, err := b.(sandbox.Meter).Stats(ctx(t), id)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.PIDs < 1 || st.MemoryBytes <= 0 || st.CPUSeconds < 0 {
		t.Errorf("Stats of a running sandbox = %+v, want pids ≥ 1, memory > 0, cpu ≥ 0", st)
	}
	// A total, if the backend keeps one, counts what the sandbox runs.
	mt, ok := b.(sandbox.MeterTotal)
	if !ok {
		return
	}
	total0, err := mt.TotalCPUSeconds(ctx(t))
	if err != nil || total0 < st.CPUSeconds {
		t.Fatalf("TotalCPUSeconds = %v, %v; want at least the sandbox's %v", total0, err, st.CPUSeconds)
	}
	st, _ = b.(sandbox.Meter).Stats(ctx(t), id) // read after total0: the total moves at least as much
	execIn(t, b, id, "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	st2, _ := b.(sandbox.Meter).Stats(ctx(t), id)
	total1, err := mt.TotalCPUSeconds(ctx(t))
	if used := st2.CPUSeconds - st.CPUSeconds; err != nil || used < 0.01 || total1-total0 < used {
		t.Errorf("a busy loop used %.3fs of CPU in the sandbox and the total moved %.3fs (%v); want the total to count it", used, total1-total0, err)
	}
}

func testUpdate(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	r := spec(id).Resources
	r.VCPUs, r.MemoryMiB, r.PIDs = 0.5, 320, 96
	if err := b.(sandbox.Updater).Update(ctx(t), id, r); err != nil {
		t.Fatalf("Update: %v", err)
	}
	healthy(t, b, id)
}

// testDead: a sandbox that died stays listed (recovery must find its
// traces) but not alive, until Destroy removes it.
func testDead(t *testing.T, h Harness, b sandbox.Backend) {
	id := create(t, b)
	h.Kill(t, b, id)
	eventually(t, "a killed sandbox is still alive", func() bool { return !alive(t, b, id) })
	if !listed(t, b, id) {
		t.Errorf("List lost %s when it died; recovery could not clean it", id)
	}
	if err := b.Destroy(ctx(t), id); err != nil {
		t.Fatalf("Destroy of a dead sandbox: %v", err)
	}
	gone(t, b, id)
}

// testRestart: a new backend over the same host finds the live and the
// dead sandboxes, reaches the live one's agent, cleans both and creates.
func testRestart(t *testing.T, h Harness, b sandbox.Backend) {
	live, dead := create(t, b), create(t, b)
	h.Kill(t, b, dead)
	eventually(t, "a killed sandbox is still alive", func() bool { return !alive(t, b, dead) })
	b2 := h.Restart(t, b)
	for _, id := range []string{live, dead} {
		if !listed(t, b2, id) {
			t.Errorf("after restart List misses %s", id)
		}
	}
	if !alive(t, b2, live) {
		t.Fatalf("after restart the live sandbox is not alive")
	}
	if alive(t, b2, dead) {
		t.Errorf("after restart the dead sandbox is alive")
	}
	healthy(t, b2, live)
	for _, id := range []string{live, dead} {
		if err := b2.Destroy(ctx(t), id); err != nil {
			t.Errorf("Destroy(%s) after restart: %v", id, err)
		}
		gone(t, b2, id)
	}
	id := create(t, b2)
	healthy(t, b2, id)
}
