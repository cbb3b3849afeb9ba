package fake_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/backend/fake"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func TestMain(m *testing.M) {
	fake.HandleShim()
	os.Exit(m.Run())
}

func newBackend(t *testing.T, cfg fake.Config) *fake.Backend {
	t.Helper()
	host, err := fake.NewHost(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	return fake.New(host, cfg)
}

func spec(id string) sandbox.Spec {
	return sandbox.Spec{ID: id, Template: "base", Resources: sandbox.Resources{VCPUs: 1, MemoryMiB: 128, DiskMiB: 64, PIDs: 32}}
}

func mustCreate(t *testing.T, b *fake.Backend, id string) {
	t.Helper()
	if _, err := b.Create(context.Background(), spec(id)); err != nil {
		t.Fatalf("Create(%s): %v", id, err)
	}
}

// TestFaults: an injected fault fails its operation (a create after the
// sandbox started, which is rolled back) until it is cleared.
func TestFaults(t *testing.T) {
	boom := errors.New("boom")
	ctx := context.Background()
	for _, tc := range []struct {
		op   fake.Op
		call func(b *fake.Backend, id string) error
	}{
		{fake.OpCreate, func(b *fake.Backend, id string) error { _, err := b.Create(ctx, spec(id+"x")); return err }},
		{fake.OpDestroy, func(b *fake.Backend, id string) error { return b.Destroy(ctx, id) }},
		{fake.OpAlive, func(b *fake.Backend, id string) error { _, err := b.Alive(ctx, id); return err }},
		{fake.OpDial, func(b *fake.Backend, id string) error {
			c, err := b.Dial(ctx, id)
			if err == nil {
				c.Close()
			}
			return err
		}},
		{fake.OpList, func(b *fake.Backend, id string) error { _, err := b.List(ctx); return err }},
		{fake.OpPause, func(b *fake.Backend, id string) error {
			if err := b.Pause(ctx, id); err != nil {
				return err
			}
			return b.Resume(ctx, id)
		}},
		{fake.OpStats, func(b *fake.Backend, id string) error { _, err := b.Stats(ctx, id); return err }},
		{fake.OpUpdate, func(b *fake.Backend, id string) error { return b.Update(ctx, id, spec(id).Resources) }},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			b := newBackend(t, fake.Config{})
			mustCreate(t, b, "sb1")
			before := b.Calls(tc.op)
			b.Fail(tc.op, boom)
			if err := tc.call(b, "sb1"); !errors.Is(err, boom) {
				t.Errorf("with the fault: %v, want it", err)
			}
			if got := b.Host().IDs(); !slices.Equal(got, []string{"sb1"}) {
				t.Errorf("host has %v after the fault, want [sb1] (a failed create leaves nothing)", got)
			}
			b.Fail(tc.op, nil)
			if err := tc.call(b, "sb1"); err != nil {
				t.Errorf("fault cleared: %v", err)
			}
			if n := b.Calls(tc.op) - before; n != 2 {
				t.Errorf("Calls(%s) rose by %d, want 2", tc.op, n)
			}
		})
	}
}

// TestRestart: the old backend stops working; the new one sees the same
// sandboxes, the dead as dead.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, fake.Config{})
	mustCreate(t, b, "live")
	mustCreate(t, b, "dead")
	if err := b.Host().Kill("dead"); err != nil {
		t.Fatal(err)
	}
	b2 := b.Restart()
	if _, err := b.List(ctx); err == nil {
		t.Errorf("the backend of the stopped daemon still answers")
	}
	ids, err := b2.List(ctx)
	if err != nil || !slices.Equal(ids, []string{"dead", "live"}) {
		t.Fatalf("List after restart = %v, %v", ids, err)
	}
	for id, want := range map[string]bool{"live": true, "dead": false} {
		if ok, err := b2.Alive(ctx, id); ok != want || err != nil {
			t.Errorf("Alive(%s) = %v, %v; want %v", id, ok, err, want)
		}
	}
	c, err := b2.Dial(ctx, "live")
	if err != nil {
		t.Fatalf("Dial after restart: %v", err)
	}
	c.Close()
}

// TestUnavailable: paused, dead and unreachable sandboxes refuse dials
// with ErrUnavailable; unreachable ones stay alive.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, fake.Config{})
	for _, id := range []string{"paused", "dead", "unreach"} {
		mustCreate(t, b, id)
	}
	if err := b.Pause(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if err := b.Host().Kill("dead"); err != nil {
		t.Fatal(err)
	}
	if err := b.Host().SetUnreachable("unreach", true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"paused", "dead", "unreach"} {
		if _, err := b.Dial(ctx, id); !errors.Is(err, sandbox.ErrUnavailable) {
			t.Errorf("Dial(%s): %v, want ErrUnavailable", id, err)
		}
	}
	if ok, _ := b.Alive(ctx, "unreach"); !ok {
		t.Errorf("an unreachable agent's sandbox must stay alive")
	}
	b.Host().SetUnreachable("unreach", false)
	c, err := b.Dial(ctx, "unreach")
	if err != nil {
		t.Fatalf("Dial once reachable: %v", err)
	}
	c.Close()
}

func TestCapacityStatsUpdate(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t, fake.Config{MaxSandboxes: 1, Templates: []string{"base", "py"}})
	mustCreate(t, b, "one")
	if _, err := b.Create(ctx, spec("two")); !errors.Is(err, sandbox.ErrNoCapacity) {
		t.Errorf("Create past MaxSandboxes: %v, want ErrNoCapacity", err)
	}
	want := sandbox.Stats{CPUSeconds: 2.5, MemoryBytes: 1 << 30, PIDs: 7}
	b.Host().SetStats("one", want)
	if got, err := b.Stats(ctx, "one"); got != want || err != nil {
		t.Errorf("Stats = %+v, %v; want %+v", got, err, want)
	}
	r := sandbox.Resources{VCPUs: 2, MemoryMiB: 512, DiskMiB: 999, PIDs: 64}
	if err := b.Update(ctx, "one", r); err != nil {
		t.Fatal(err)
	}
	s, _ := b.Host().Spec("one")
	if r.DiskMiB = 64; s.Resources != r {
		t.Errorf("resources after Update = %+v, want %+v (disk unchanged)", s.Resources, r)
	}
	if got := b.Templates(); !slices.Equal(got, []string{"base", "py"}) {
		t.Errorf("Templates() = %v", got)
	}
}
