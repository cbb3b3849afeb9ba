//go:build cgo && linux && amd64

package container

import (
	"crypto/sha256"
	"encoding/binary"
	"os"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccomp's return values (linux/seccomp.h).
const (
	retKillThread  = 0x00000000
	retKillProcess = 0x80000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000
	auditArchI386  = 0x40000003
	x32SyscallBit  = 0x40000000
)

// compileLikeCrun compiles profile with libseccomp the way crun 1.8's
// libcrun_generate_seccomp does (seccomp_init with the default action,
// the profile's architectures, one rule per name, a rule per argument
// when one argument index repeats, seccomp_export_bpf): the filter crun
// writes to seccomp.bpf, which paddockd hands back to crun.
func compileLikeCrun(t testing.TB, p *specs.LinuxSeccomp) []byte {
	t.Helper()
	action := func(a specs.LinuxSeccompAction, errno *uint) libseccomp.ScmpAction {
		switch a {
		case specs.ActAllow:
			return libseccomp.ActAllow
		case specs.ActErrno:
			e := int16(unix.EPERM)
			if errno != nil {
				e = int16(*errno)
			}
			return libseccomp.ActErrno.SetReturnCode(e)
		case specs.ActKillProcess:
			return libseccomp.ActKillProcess
		case specs.ActKill, specs.ActKillThread:
			return libseccomp.ActKillThread
		}
		t.Fatalf("action %s not in the test's table", a)
		return 0
	}
	ops := map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
		specs.OpNotEqual: libseccomp.CompareNotEqual, specs.OpLessThan: libseccomp.CompareLess,
		specs.OpLessEqual: libseccomp.CompareLessOrEqual, specs.OpEqualTo: libseccomp.CompareEqual,
		specs.OpGreaterEqual: libseccomp.CompareGreaterEqual, specs.OpGreaterThan: libseccomp.CompareGreater,
		specs.OpMaskedEqual: libseccomp.CompareMaskedEqual,
	}
	def := action(p.DefaultAction, p.DefaultErrnoRet)
	f, err := libseccomp.NewFilter(def)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	for _, a := range p.Architectures {
		arch, err := libseccomp.GetArchFromString(string(a)[len("SCMP_ARCH_"):])
		if err != nil {
			t.Fatal(err)
		}
		if err := f.AddArch(arch); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range p.Syscalls {
		act := action(r.Action, r.ErrnoRet)
		if act == def {
			continue
		}
		var conds []libseccomp.ScmpCondition
		seen, repeat := map[uint]bool{}, false
		for _, a := range r.Args {
			repeat = repeat || seen[a.Index]
			seen[a.Index] = true
			c, err := libseccomp.MakeCondition(a.Index, ops[a.Op], a.Value, a.ValueTwo)
			if a.Op != specs.OpMaskedEqual {
				c, err = libseccomp.MakeCondition(a.Index, ops[a.Op], a.Value)
			}
			if err != nil {
				t.Fatal(err)
			}
			conds = append(conds, c)
		}
		for _, name := range r.Names {
			nr, err := libseccomp.GetSyscallFromName(name)
			if err != nil {
				continue // crun warns and skips names libseccomp does not know
			}
			switch {
			case len(conds) == 0:
				err = f.AddRule(nr, act)
			case repeat:
				for _, c := range conds {
					if err = f.AddRuleConditional(nr, act, []libseccomp.ScmpCondition{c}); err != nil {
						break
					}
				}
			default:
				err = f.AddRuleConditional(nr, act, conds)
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	// ExportBPFMem needs libseccomp 2.6; crun 1.8 exports to a file.
	out, err := os.CreateTemp(t.TempDir(), "seccomp.bpf")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := f.ExportBPF(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runFilter runs a seccomp filter over one struct seccomp_data. The VM
// loads 32-bit words big-endian, seccomp native (little-endian) ones: each
// word goes in big-endian at its native offset.
func runFilter(t *testing.T, vm *bpf.VM, nr int32, arch uint32, args [6]uint64) uint32 {
	t.Helper()
	in := make([]byte, 64)
	binary.BigEndian.PutUint32(in[0:], uint32(nr))
	binary.BigEndian.PutUint32(in[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(in[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(in[20+8*i:], uint32(a>>32))
	}
	v, err := vm.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

// profileDecision is what the profile says of syscall nr with args,
// straight from its rules: the action of the rules that match (they must
// agree), else the default.
func profileDecision(t *testing.T, p *specs.LinuxSeccomp, byNr map[int32][]specs.LinuxSyscall, nr int32, args [6]uint64) uint32 {
	t.Helper()
	ret := func(a specs.LinuxSeccompAction, errno *uint) uint32 {
		switch a {
		case specs.ActAllow:
			return retAllow
		case specs.ActErrno:
			if errno != nil {
				return retErrno | uint32(*errno)
			}
			return retErrno | uint32(unix.EPERM)
		}
		t.Fatalf("action %s not in the test's table", a)
		return 0
	}
	match := func(a specs.LinuxSeccompArg) bool {
		v := args[a.Index]
		switch a.Op {
		case specs.OpNotEqual:
			return v != a.Value
		case specs.OpLessThan:
			return v < a.Value
		case specs.OpLessEqual:
			return v <= a.Value
		case specs.OpEqualTo:
			return v == a.Value
		case specs.OpGreaterEqual:
			return v >= a.Value
		case specs.OpGreaterThan:
			return v > a.Value
		case specs.OpMaskedEqual:
			return v&a.Value == a.ValueTwo
		}
		t.Fatalf("operator %s not in the test's table", a.Op)
		return false
	}
	decided, got := false, uint32(0)
	for _, r := range byNr[nr] {
		ok := true
		for _, a := range r.Args {
			ok = ok && match(a)
		}
		if !ok {
			continue
		}
		d := ret(r.Action, r.ErrnoRet)
		if decided && d != got {
			t.Fatalf("syscall %d %v: the profile's rules disagree (%#x, %#x)", nr, args, got, d)
		}
		decided, got = true, d
	}
	if !decided {
		return ret(p.DefaultAction, p.DefaultErrnoRet)
	}
	return got
}

// TestSeccompFilterDecisions: the filter crun compiles from the sandbox's
// profile (and paddockd hands back to crun) decides every syscall number
// 0..511 and every argument value the profile's conditions turn on
// exactly as the profile's rules say, and refuses the compat ABIs.
func TestSeccompFilterDecisions(t *testing.T) {
	s, err := buildSpec(specParams{ID: "x", Rootfs: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	p := s.Linux.Seccomp
	raw := compileLikeCrun(t, p)
	if len(raw)%8 != 0 || len(raw) > bpfMaxBytes {
		t.Fatalf("filter of %d bytes", len(raw))
	}
	insns := make([]bpf.RawInstruction, len(raw)/8)
	for i := range insns {
		b := raw[8*i:]
		insns[i] = bpf.RawInstruction{Op: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	prog, ok := bpf.Disassemble(insns)
	if !ok {
		t.Fatal("the filter has instructions the VM does not know")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	byNr := map[int32][]specs.LinuxSyscall{}
	for _, r := range p.Syscalls {
		for _, name := range r.Names {
			if nr, err := libseccomp.GetSyscallFromName(name); err == nil {
				byNr[int32(nr)] = append(byNr[int32(nr)], r)
			}
		}
	}
	// The values each conditioned argument is tried with: every datum,
	// its neighbours, each single bit, 0 and all ones, 32-bit truncations.
	interesting := map[uint]map[uint64]bool{}
	for _, rs := range byNr {
		for _, r := range rs {
			for _, a := range r.Args {
				m := interesting[a.Index]
				if m == nil {
					m = map[uint64]bool{0: true, ^uint64(0): true, 0xffffffff: true, 1 << 32: true}
					interesting[a.Index] = m
				}
				for _, v := range []uint64{a.Value, a.Value + 1, a.Value - 1, a.Value | 1<<32, a.ValueTwo} {
					m[v] = true
				}
				for bit := range 64 {
					m[uint64(1)<<bit] = true
					m[a.ValueTwo|uint64(1)<<bit] = true
				}
			}
		}
	}
	const arch = uint32(unix.AUDIT_ARCH_X86_64)
	checked, allowed := 0, 0
	for nr := int32(0); nr < 512; nr++ {
		cases := [][6]uint64{{}}
		for _, r := range byNr[nr] {
			for _, a := range r.Args {
				for v := range interesting[a.Index] {
					var args [6]uint64
					args[a.Index] = v
					cases = append(cases, args)
				}
			}
		}
		for _, args := range cases {
			got, want := runFilter(t, vm, nr, arch, args), profileDecision(t, p, byNr, nr, args)
			if got != want {
				t.Errorf("syscall %d args %#x: filter %#x, profile %#x", nr, args, got, want)
			}
			checked++
			if got == retAllow && args == ([6]uint64{}) {
				allowed++
			}
		}
		// The compat ABIs: i386, and x32 (nr | 0x40000000 under the
		// native audit arch) never reach a rule.
		for _, c := range []struct {
			name string
			nr   int32
			arch uint32
		}{{"i386", nr, auditArchI386}, {"x32", nr | x32SyscallBit, arch}} {
			if got := runFilter(t, vm, c.nr, c.arch, [6]uint64{}); got == retAllow {
				t.Errorf("%s syscall %d allowed", c.name, nr)
			}
		}
	}
	if allowed < 300 {
		t.Errorf("only %d syscalls allowed with zero arguments: the profile did not load", allowed)
	}
	// TestCrunSeccompBPF (integration) logs the SHA-256 of the filter a
	// real crun compiled: the same as this one's when crun and this test
	// link the same libseccomp.
	t.Logf("%d instructions (sha256 %x); %d decisions checked, %d syscalls allowed with zero arguments",
		len(insns), sha256.Sum256(raw), checked, allowed)
}

// BenchmarkCompileLikeCrun is what crun spends in libseccomp compiling
// the sandbox's profile on a create without the handed-back filter.
func BenchmarkCompileLikeCrun(b *testing.B) {
	s, err := buildSpec(specParams{ID: "x", Rootfs: "/r"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		compileLikeCrun(b, s.Linux.Seccomp)
	}
}
