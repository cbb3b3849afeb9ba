package manager_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/network"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// fakeNet is a manager.Network that records what the manager asks of it.
type fakeNet struct {
	mu       sync.Mutex
	attached map[string]string // id → mode
	detached []string
	noNetns  map[string]bool // ids Update answers network.ErrNotFound for
}

var _ manager.Network = (*fakeNet)(nil)

func (f *fakeNet) Attach(ctx context.Context, id string, p sandbox.NetworkPolicy, withCA bool) (*sandbox.NetworkConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attached[id] = p.Mode
	return &sandbox.NetworkConfig{NetnsPath: "/run/fake/" + id, Nameserver: "10.88.0.1"}, nil
}

func (f *fakeNet) Update(ctx context.Context, id string, p sandbox.NetworkPolicy) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noNetns[id] {
		return fmt.Errorf("network update %s: %w", id, network.ErrNotFound)
	}
	f.attached[id] = p.Mode
	return nil
}

func (f *fakeNet) PolicyChanged(id string) {}

func (f *fakeNet) Check(p sandbox.NetworkPolicy) error {
	if slices.Contains(p.Allow, "127.0.0.1/32") {
		return errors.New(`allow entry "127.0.0.1/32": reaches 127.0.0.0/8, which is loopback`)
	}
	return nil
}

func (f *fakeNet) Detach(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.attached, id)
	f.detached = append(f.detached, id)
	return nil
}

func (f *fakeNet) List(ctx context.Context) ([]string, error) { return nil, nil }

func (f *fakeNet) mode(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attached[id]
}

// TestUpdateNetworkModes: every mode change of a running sandbox goes to
// the Network and the store; entries beyond the ceiling and sandboxes
// without a namespace of the daemon's are refused with their classes.
func TestUpdateNetworkModes(t *testing.T) {
	tm := newTestManager(t)
	fn := &fakeNet{attached: map[string]string{}, noNetns: map[string]bool{}}
	tm.m = manager.New(tm.cfg, manager.Deps{Store: tm.st, Backend: tm.backend, Network: fn})
	ctx := context.Background()
	rec := tm.create("k", sandbox.CreateRequest{})
	if got := fn.mode(rec.ID); got != sandbox.NetworkOff {
		t.Fatalf("offline create attached with mode %q, want off", got)
	}
	steps := []struct {
		name    string
		p       sandbox.NetworkPolicy
		wantErr error
		want    string // mode stored and attached after the step
	}{
		{"off → allowlist", sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}, nil, sandbox.NetworkAllowlist},
		{"allowlist → full", sandbox.NetworkPolicy{Mode: sandbox.NetworkFull}, nil, sandbox.NetworkFull},
		{"full → off", sandbox.NetworkPolicy{Mode: sandbox.NetworkOff}, nil, sandbox.NetworkOff},
		{"off → off", sandbox.NetworkPolicy{Mode: sandbox.NetworkOff}, nil, sandbox.NetworkOff},
		{"beyond the ceiling", sandbox.NetworkPolicy{Mode: sandbox.NetworkAllowlist, Allow: []string{"127.0.0.1/32"}}, sandbox.ErrInvalid, sandbox.NetworkOff},
		{"entries in mode off", sandbox.NetworkPolicy{Mode: sandbox.NetworkOff, Allow: []string{"pypi.org"}}, sandbox.ErrInvalid, sandbox.NetworkOff},
		{"off → full", sandbox.NetworkPolicy{Mode: sandbox.NetworkFull}, nil, sandbox.NetworkFull},
	}
	for _, s := range steps {
		_, err := tm.m.UpdateNetwork(ctx, "k", rec.ID, s.p)
		if !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Errorf("%s: %v, want %v", s.name, err, s.wantErr)
		}
		if got := tm.record(rec.ID).Network.Mode; got != s.want {
			t.Errorf("%s: stored mode %q, want %q", s.name, got, s.want)
		}
		if got := fn.mode(rec.ID); got != s.want {
			t.Errorf("%s: attached mode %q, want %q", s.name, got, s.want)
		}
	}

	// A sandbox without a namespace of the daemon's (an older daemon's)
	// cannot be switched: 409 with the reason, and nothing stored.
	old := tm.create("k", sandbox.CreateRequest{})
	fn.mu.Lock()
	fn.noNetns[old.ID] = true
	fn.mu.Unlock()
	_, err := tm.m.UpdateNetwork(ctx, "k", old.ID, sandbox.NetworkPolicy{Mode: sandbox.NetworkFull})
	if !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("switching on a sandbox without a namespace: %v, want ErrConflict", err)
	}
	if got := tm.record(old.ID).Network.Mode; got != sandbox.NetworkOff {
		t.Errorf("stored mode after the refused switch: %q", got)
	}

	// Delete detaches.
	if err := tm.m.Delete(ctx, "k", rec.ID); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(fn.detached, rec.ID) {
		t.Errorf("delete did not detach %s: %v", rec.ID, fn.detached)
	}
}
