package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// escapeScript tries, as root inside the sandbox, every way out of its
// disk quota: giving /workspace another project id (the ext4/xfs way),
// making a btrfs subvolume (a new subvolume would have a quota group of
// its own, without a limit) and lifting its own quota group's limit. It
// prints one "name:result" per attempt; "ok" would be an escape.
const escapeScript = `import errno, fcntl, os, struct
fd = os.open("/workspace", os.O_RDONLY)
out = []
def attempt(name, req, buf):
    try:
        fcntl.ioctl(fd, req, buf, True)
        out.append(name + ":ok")
    except OSError as e:
        out.append(name + ":" + errno.errorcode.get(e.errno, str(e.errno)))
# FS_IOC_FSGETXATTR, then FS_IOC_FSSETXATTR with project id 4242 and PROJINHERIT
x = bytearray(28)
try:
    fcntl.ioctl(fd, 0x801c581f, x, True)
except OSError:
    pass
struct.pack_into("I", x, 0, struct.unpack_from("I", x, 0)[0] | 0x200)
struct.pack_into("I", x, 12, 4242)
attempt("setprojid", 0x401c5820, x)
# BTRFS_IOC_SUBVOL_CREATE "escape" in /workspace
v = bytearray(4096)
v[8:14] = b"escape"
attempt("subvolume", 0x5000940E, v)
# BTRFS_IOC_QGROUP_LIMIT: no limit on the caller's own quota group
attempt("qgroup_limit", 0x8030942B, bytearray(struct.pack("QQQQQQ", 0, 1, 2**64 - 1, 0, 0, 0)))
# BTRFS_IOC_QUOTA_CTL: disable quotas
attempt("quota_off", 0xC0109428, bytearray(struct.pack("QQ", 2, 0)))
print(" ".join(out))
`

// TestDiskQuotaEscape: root inside a sandbox can neither change its
// files' project id nor make a subvolume nor touch quota groups, and a
// write past disk_mib fails with "Disk quota exceeded" (or "No space left
// on device") while the sandbox, another sandbox and the daemon keep
// working; the sandbox's disk usage stays within its limit.
func TestDiskQuotaEscape(t *testing.T) {
	ctx := ctxT(t)
	sb := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 64}})
	res, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"python3", "-c", escapeScript}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 || strings.TrimSpace(res.Stdout) == "" {
		t.Fatalf("escape script: %+v", res)
	}
	t.Logf("attempts from inside: %s", strings.TrimSpace(res.Stdout))
	for _, a := range strings.Fields(res.Stdout) {
		if strings.HasSuffix(a, ":ok") {
			t.Errorf("root inside the sandbox succeeded at %s", a)
		}
	}
	if shared.stateDir != "" {
		if _, err := os.Stat(filepath.Join(shared.stateDir, "disks", sb.ID, "upper", "workspace", "escape")); err == nil {
			t.Errorf("a subvolume made from inside the sandbox exists on the host")
		}
	}
	other := newSandbox(t, &api.CreateSandboxRequest{Resources: &api.Resources{DiskMiB: 128}})
	res, err = sb.Exec(ctx, api.ExecRequest{Command: "dd if=/dev/zero of=/workspace/big bs=1M count=200 2>&1; sync; du -sm /workspace/big"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "Disk quota exceeded") && !strings.Contains(res.Stdout, "No space left on device") {
		t.Fatalf("200 MiB into a 64 MiB disk: %+v", res)
	}
	t.Logf("dd past disk_mib: %s", strings.TrimSpace(tail(res.Stdout, 200)))
	st, err := sb.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.DiskBytes <= 0 || st.DiskBytes > 65<<20 {
		t.Errorf("disk usage %d bytes, want > 0 and within the 64 MiB limit", st.DiskBytes)
	}
	res, err = other.Exec(ctx, api.ExecRequest{Command: "dd if=/dev/zero of=/workspace/f bs=1M count=96 status=none && sync && echo written"})
	if err != nil || strings.TrimSpace(res.Stdout) != "written" {
		t.Fatalf("another sandbox writing 96 MiB of its 128: %+v %v", res, err)
	}
	res, err = sb.Exec(ctx, api.ExecRequest{Command: "rm /workspace/big && echo freed > /workspace/ok && cat /workspace/ok"})
	if err != nil || res.Stdout != "freed\n" {
		t.Fatalf("after freeing: %+v %v", res, err)
	}
	third := newSandbox(t, &api.CreateSandboxRequest{})
	if res, err := third.Exec(ctx, api.ExecRequest{Command: "echo alive"}); err != nil || res.Stdout != "alive\n" {
		t.Fatalf("the daemon after the quota fight: %+v %v", res, err)
	}
}
