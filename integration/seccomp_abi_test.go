package integration

import (
	"runtime"
	"strings"
	"testing"
)

// seccompABIProbe makes getpid through the compat ABIs of amd64: i386's
// int $0x80 (getpid is 20 there) and x32's syscall (39 | 0x40000000).
// Each is in a child, since the filter may kill the caller; the parent
// prints what the child printed or how it died.
const seccompABIProbe = `#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static long i386_getpid(void) { long r; __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory"); return r; }
static long x32_getpid(void) { long r; __asm__ volatile("syscall" : "=a"(r) : "a"(39L | 0x40000000L) : "rcx", "r11", "memory"); return r; }
static void probe(const char *name, long (*f)(void)) {
	fflush(stdout);
	pid_t p = fork();
	if (p == 0) { long r = f(); printf("%s %s\n", name, r == (long)getpid() ? "ALLOWED" : "refused"); exit(0); }
	int st; waitpid(p, &st, 0);
	if (WIFSIGNALED(st)) printf("%s killed\n", name);
}
int main(void) { probe("i386", i386_getpid); probe("x32", x32_getpid); return 0; }
`

// TestSeccompCompatABI: the seccomp filter admits only the native syscall
// ABI; a syscall through amd64's i386 or x32 ABI is refused or kills the
// caller, never runs.
func TestSeccompCompatABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the compat ABIs probed are amd64's")
	}
	sb := newSandbox(t, nil)
	if _, err := sb.Files().Write(ctxT(t), "abi.c", []byte(seccompABIProbe), 0); err != nil {
		t.Fatal(err)
	}
	res := advExec(t, sb, "gcc -O0 -o /tmp/abi abi.c && /tmp/abi", 120)
	out := strings.TrimSpace(res.Stdout)
	if res.ExitCode == nil || *res.ExitCode != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("probe: %+v", res)
	}
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("a compat-ABI syscall ran in the sandbox:\n%s", out)
	}
	t.Logf("compat ABIs: %s", strings.ReplaceAll(out, "\n", "; "))
}
