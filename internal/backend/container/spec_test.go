package container

import (
	"runtime"
	"slices"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

func TestBuildSpec(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v1, sw   bool
		wantSwap bool
	}{
		{"cgroup v1 with memsw", true, true, true},
		{"cgroup v1 without memsw", true, false, false},
		{"cgroup v2", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := buildSpec(specParams{
				ID: "sbx1", CgroupParent: "paddock", Rootfs: "/r", HostMounts: []string{"/usr"}, UIDBase: 1 << 20,
				Resources: sandbox.Resources{VCPUs: 1.5, MemoryMiB: 256, DiskMiB: 100, PIDs: 64},
				Env:       map[string]string{"B": "2", "A": "1"}, CgroupV1: tc.v1, HasMemsw: tc.sw,
			})
			if err != nil {
				t.Fatal(err)
			}
			var ns []specs.LinuxNamespaceType
			for _, n := range s.Linux.Namespaces {
				if n.Path != "" {
					t.Errorf("namespace %s joins %s", n.Type, n.Path)
				}
				ns = append(ns, n.Type)
			}
			for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace,
				specs.MountNamespace, specs.NetworkNamespace, specs.UserNamespace, specs.CgroupNamespace} {
				if !slices.Contains(ns, want) {
					t.Errorf("missing namespace %s", want)
				}
			}
			if m := s.Linux.UIDMappings; len(m) != 1 || m[0].ContainerID != 0 || m[0].HostID != 1<<20 || m[0].Size != idRange {
				t.Errorf("uid mappings %+v", m)
			}
			if !s.Process.NoNewPrivileges || s.Linux.Seccomp == nil || s.Hostname != "sandbox" {
				t.Fatal("no_new_privs, seccomp or hostname missing")
			}
			if a := s.Linux.Seccomp.Architectures; runtime.GOARCH == "amd64" && !slices.Equal(a, []specs.Arch{specs.ArchX86_64}) {
				t.Errorf("seccomp architectures %v, want the native ABI only", a)
			}
			names := 0
			for _, r := range s.Linux.Seccomp.Syscalls {
				names += len(r.Names)
			}
			if s.Linux.Seccomp.DefaultAction == specs.ActAllow || names < 300 {
				t.Errorf("seccomp profile: default %s, %d syscalls named", s.Linux.Seccomp.DefaultAction, names)
			}
			for _, c := range []string{"CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_PTRACE", "CAP_MKNOD"} {
				if slices.Contains(s.Process.Capabilities.Bounding, c) {
					t.Errorf("capability %s kept", c)
				}
			}
			r := s.Linux.Resources
			if *r.Memory.Limit != 256<<20 || *r.Pids.Limit != pidsMax(64) || *r.CPU.Quota != 150000 || *r.CPU.Period != 100000 {
				t.Errorf("resources %+v %+v %+v", r.Memory, r.Pids, r.CPU)
			}
			if (r.Memory.Swap != nil) != tc.wantSwap || (tc.wantSwap && *r.Memory.Swap != *r.Memory.Limit) {
				t.Errorf("swap %v, want set=%v and equal to the limit", r.Memory.Swap, tc.wantSwap)
			}
			if !slices.Contains(s.Process.Env, "A=1") || slices.Index(s.Process.Env, "A=1") > slices.Index(s.Process.Env, "B=2") {
				t.Errorf("env %v", s.Process.Env)
			}
			var usr *specs.Mount
			for i := range s.Mounts {
				if s.Mounts[i].Destination == "/usr" {
					usr = &s.Mounts[i]
				}
			}
			if usr == nil || !slices.Contains(usr.Options, "ro") {
				t.Errorf("/usr mount %+v, want read-only", usr)
			}
			if !slices.Contains(s.Linux.MaskedPaths, "/proc/kcore") || !slices.Contains(s.Linux.ReadonlyPaths, "/proc/sys") {
				t.Error("masked or read-only paths missing")
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/t\011x`: "/t\tx"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for id, ok := range map[string]bool{"sbabc123": true, "": false, "../x": false, "a/b": false, "UPPER": false} {
		if validID(id) != ok {
			t.Errorf("validID(%q) = %v", id, !ok)
		}
	}
}

// TestSpecSpareIdle: the agent gets --spare-idle only when spares retire,
// and a warm-pool sandbox's agent keeps its spare.
func TestSpecSpareIdle(t *testing.T) {
	b := &Backend{cfg: Config{SpareIdle: 90 * time.Second}}
	for _, tc := range []struct {
		spec sandbox.Spec
		want time.Duration
		arg  string
	}{
		{sandbox.Spec{ID: "a"}, 90 * time.Second, "1m30s"},
		{sandbox.Spec{ID: "b", Pooled: true}, 0, ""},
	} {
		d := b.spareIdle(tc.spec)
		s, err := buildSpec(specParams{ID: tc.spec.ID, Rootfs: "/r", SpareIdle: d})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(s.Process.Args, "--spare-idle")
		switch {
		case d != tc.want:
			t.Errorf("%+v: idle %v, want %v", tc.spec, d, tc.want)
		case tc.arg == "" && i >= 0:
			t.Errorf("%+v: args %q hold --spare-idle", tc.spec, s.Process.Args)
		case tc.arg != "" && (i < 0 || i+1 >= len(s.Process.Args) || s.Process.Args[i+1] != tc.arg):
			t.Errorf("%+v: args %q, want --spare-idle %s", tc.spec, s.Process.Args, tc.arg)
		}
	}
}
