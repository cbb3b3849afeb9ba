package network

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
)

// checkGone fails if anything of sandbox id is left.
func checkGone(t *testing.T, tm *testManager, id string, att *Attachment) {
	t.Helper()
	if _, err := netlink.LinkByName(tm.ifaceName(id)); err == nil {
		t.Errorf("veth %s left", tm.ifaceName(id))
	}
	if ids, _ := tm.vethIDs(); slices.Contains(ids, id) {
		t.Errorf("veth with alias of %s left", id)
	}
	st, err := tm.readNFT()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(st.ids(), id) {
		t.Errorf("chains or sets of %s left: %v %v", id, st.chains, st.sets)
	}
	for name, m := range st.mapEntries {
		if m[tm.ifaceName(id)] {
			t.Errorf("element of %s left in %s", id, name)
		}
	}
	if exists(tm.netnsPath(id)) || pinned(t, tm.Manager, id) {
		t.Errorf("netns %s left", tm.netnsPath(id))
	}
	if exists(tm.leasePath(id)) {
		t.Errorf("lease %s left", tm.leasePath(id))
	}
	if att != nil {
		if _, ok := tm.SandboxByAddr(att.SandboxAddr); ok {
			t.Errorf("address %s still mapped", att.SandboxAddr)
		}
	}
	if _, ok := tm.Policy(id); ok {
		t.Errorf("policy of %s left", id)
	}
	ids, err := tm.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, id) {
		t.Errorf("List still has %s", id)
	}
}

func TestTeardown(t *testing.T) {
	tm := newTestManager(t, "10.250.15.0/24")
	att := mustSetup(t, tm, "td1", Policy{Mode: ModeAllowlist, Allow: []string{"10.0.0.0/8", "1.2.3.4:22"}, Deny: []string{"10.1.0.0/16"}})
	if id, ok := tm.SandboxByAddr(att.SandboxAddr); !ok || id != "td1" {
		t.Fatalf("SandboxByAddr = %q, %v", id, ok)
	}
	if !pinned(t, tm.Manager, "td1") || !exists(att.NetnsPath) {
		t.Fatal("netns not mounted")
	}
	if err := tm.Teardown(t.Context(), "td1"); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tm, "td1", att)
	if err := tm.Teardown(t.Context(), "td1"); err != nil {
		t.Errorf("second Teardown: %v", err)
	}
	if err := tm.Teardown(t.Context(), "never-existed"); err != nil {
		t.Errorf("Teardown of unknown id: %v", err)
	}
}

func TestRecovery(t *testing.T) {
	tm := newTestManager(t, "10.250.16.0/24")
	p := Policy{Mode: ModeFull, Allow: []string{"10.99.0.1"}}
	att := mustSetup(t, tm, "crash1", p)
	att2 := mustSetup(t, tm, "crash2", Policy{Mode: ModeAllowlist})

	// Crash: the Manager is gone; a new one starts on the same state.
	m2, err := New(tm.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m2.pins.stop)
	ids, err := m2.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"crash1", "crash2"}) {
		t.Errorf("List = %v", ids)
	}
	if id, ok := m2.SandboxByAddr(att.SandboxAddr); !ok || id != "crash1" {
		t.Errorf("SandboxByAddr after restart = %q, %v", id, ok)
	}
	if got, ok := m2.Policy("crash1"); !ok || got.Mode != ModeFull || !slices.Equal(got.Allow, p.Allow) {
		t.Errorf("Policy after restart = %+v, %v", got, ok)
	}
	// The rules survived and were re-applied; the addresses are kept.
	wantLine(t, att, hp(privateAddr, upTCPPort), "still", "still")
	if att3, err := m2.Setup(t.Context(), "new1", Policy{Mode: ModeFull}); err != nil {
		t.Fatal(err)
	} else if att3.SandboxAddr == att.SandboxAddr || att3.SandboxAddr == att2.SandboxAddr {
		t.Errorf("new sandbox got a leased address %s", att3.SandboxAddr)
	}

	// A worse crash: the lease is lost. The other traces are still found
	// and torn down.
	if err := os.Remove(tm.leasePath("crash2")); err != nil {
		t.Fatal(err)
	}
	m3, err := New(tm.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m3.pins.stop)
	ids, _ = m3.List(t.Context())
	if !slices.Contains(ids, "crash2") {
		t.Errorf("List without lease = %v", ids)
	}
	if err := m3.Teardown(t.Context(), "crash2"); err != nil {
		t.Fatal(err)
	}
	tm3 := &testManager{Manager: m3, cfg: tm.cfg}
	checkGone(t, tm3, "crash2", nil)

	// Only the namespace is left (a crash in the middle of Setup).
	if err := createNetns(m3.pins, "half"); err != nil {
		t.Fatal(err)
	}
	ids, _ = m3.List(t.Context())
	if !slices.Contains(ids, "half") {
		t.Errorf("List with only a namespace = %v", ids)
	}
	if _, err := m3.Setup(t.Context(), "half", Policy{Mode: ModeFull}); !errors.Is(err, ErrExists) {
		t.Errorf("Setup over stale traces: %v, want ErrExists", err)
	}
	if err := m3.Teardown(t.Context(), "half"); err != nil {
		t.Fatal(err)
	}
	checkGone(t, tm3, "half", nil)
}

func TestPoolExhausted(t *testing.T) {
	tm := newTestManager(t, "10.250.1.0/29") // two /30s
	a := mustSetup(t, tm, "p1", Policy{Mode: ModeFull})
	mustSetup(t, tm, "p2", Policy{Mode: ModeFull})
	_, err := tm.Setup(t.Context(), "p3", Policy{Mode: ModeFull})
	if !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("third Setup: %v, want ErrPoolExhausted", err)
	}
	checkGone(t, tm, "p3", nil) // nothing half made
	if err := tm.Teardown(t.Context(), "p1"); err != nil {
		t.Fatal(err)
	}
	c := mustSetup(t, tm, "p3", Policy{Mode: ModeFull})
	if c.SandboxAddr != a.SandboxAddr {
		t.Errorf("freed subnet not reused: %s, want %s", c.SandboxAddr, a.SandboxAddr)
	}
}

func TestSetupErrors(t *testing.T) {
	tm := newTestManager(t, "10.250.17.0/24")
	if _, err := tm.Setup(t.Context(), "../x", Policy{Mode: ModeFull}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad id: %v", err)
	}
	if _, err := tm.Setup(t.Context(), "e1", Policy{Mode: "open"}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("bad policy: %v", err)
	}
	mustSetup(t, tm, "e1", Policy{Mode: ModeFull})
	if _, err := tm.Setup(t.Context(), "e1", Policy{Mode: ModeFull}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate: %v", err)
	}
	if err := tm.Update(t.Context(), "e2", Policy{Mode: ModeFull}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update unknown: %v", err)
	}
	if err := tm.Update(t.Context(), "e1", Policy{Mode: ModeFull, Deny: []string{"example.com"}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("name deny in full mode: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	tm := newTestManager(t, "10.250.18.0/24")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", i)
			att, err := tm.Setup(t.Context(), id, Policy{Mode: ModeAllowlist})
			if err != nil {
				errs <- err
				return
			}
			if err := tm.Update(t.Context(), id, Policy{Mode: ModeFull}); err != nil {
				errs <- err
			}
			if got, ok := tm.SandboxByAddr(att.SandboxAddr); !ok || got != id {
				errs <- fmt.Errorf("SandboxByAddr(%s) = %q", att.SandboxAddr, got)
			}
			if err := tm.Teardown(t.Context(), id); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ids, _ := tm.List(t.Context()); len(ids) != 0 {
		t.Errorf("left: %v", ids)
	}
}
