package container

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestBPFCache(t *testing.T) {
	root := t.TempDir()
	write := func(id string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, id), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, id, "seccomp.bpf"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := func() *specs.Spec {
		s, err := buildSpec(specParams{ID: "x", Rootfs: "/r"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var c bpfCache
	s := spec()
	h, err := c.prepare(s)
	if err != nil || h == "" {
		t.Fatalf("first prepare: hash %q, %v", h, err)
	}
	if !slices.Equal(s.Linux.Seccomp.Flags, crunSeccompFlags) {
		t.Errorf("flags %v, want %v", s.Linux.Seccomp.Flags, crunSeccompFlags)
	}
	if _, ok := s.Annotations[seccompBPFAnnotation]; ok {
		t.Error("annotation before any filter was learnt")
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not whole instructions", make([]byte, 12)},
		{"longer than BPF_MAXINSNS", make([]byte, bpfMaxBytes+8)},
	} {
		write("bad", tc.b)
		if err := c.learn(root, "bad", h); err == nil {
			t.Errorf("%s: learnt", tc.name)
		}
	}
	if err := c.learn(root, "missing", h); err == nil {
		t.Error("learnt a missing file")
	}
	filter := []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f} // ret ALLOW
	write("first", filter)
	if err := c.learn(root, "first", h); err != nil {
		t.Fatal(err)
	}
	s = spec()
	if h2, err := c.prepare(s); err != nil || h2 != "" {
		t.Fatalf("second prepare: hash %q, %v", h2, err)
	}
	got, err := base64.StdEncoding.DecodeString(s.Annotations[seccompBPFAnnotation])
	if err != nil || !slices.Equal(got, filter) {
		t.Errorf("annotation %q (%v), want the learnt filter", s.Annotations[seccompBPFAnnotation], err)
	}
	if len(s.Linux.Seccomp.Syscalls) == 0 {
		t.Error("the profile left the spec (a crun without the annotation would enforce nothing)")
	}
	other := spec()
	other.Linux.Seccomp.DefaultAction = specs.ActKillProcess
	if h3, _ := c.prepare(other); h3 == "" || h3 == h {
		t.Errorf("another profile got hash %q (first %q)", h3, h)
	}
	if h4, _ := c.prepare(&specs.Spec{Linux: &specs.Linux{}}); h4 != "" {
		t.Error("a spec without seccomp wants a filter")
	}
}

func TestBPFCacheBound(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "seccomp.bpf"), make([]byte, 8), 0o600); err != nil {
		t.Fatal(err)
	}
	var c bpfCache
	for i := range bpfMaxProfiles + 5 {
		if err := c.learn(root, "a", string(rune('A'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.byHash) != bpfMaxProfiles {
		t.Errorf("%d profiles cached, want at most %d", len(c.byHash), bpfMaxProfiles)
	}
}

func TestOCIRuntimeCrun(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		crun       bool
	}{
		{"crun", "/usr/bin/crun", true},
		{"fast", "/opt/bin/crun", true},
		{"runc", "/x/runc", false},
		{"runsc", "/x/runsc", false},
	} {
		r := newOCIRuntime(tc.name, tc.path, t.TempDir(), nil)
		if r.crun() != tc.crun || (r.bpf != nil) != tc.crun {
			t.Errorf("%s at %s: crun %v, cache %v", tc.name, tc.path, r.crun(), r.bpf != nil)
		}
		s, err := buildSpec(specParams{ID: "x", Rootfs: "/r"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.prepareSpec("x", s); err != nil {
			t.Fatal(err)
		}
		if got := len(s.Linux.Seccomp.Flags) > 0; got != tc.crun {
			t.Errorf("%s: seccomp flags %v", tc.name, s.Linux.Seccomp.Flags)
		}
		if got := r.learnBPF["x"] != ""; got != tc.crun {
			t.Errorf("%s: waits to learn a filter: %v", tc.name, got)
		}
	}
}
