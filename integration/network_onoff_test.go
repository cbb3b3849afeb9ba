package integration

import (
	"archive/zip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// indexAddr is where the test's package index listens, in a namespace of
// its own routed from the host (TEST-NET-2: public as far as the network
// ceiling is concerned).
const indexAddr = "198.51.100.10"

// startIndex serves a PEP 503 package index with one wheel, tinypkg 1.0
// (tinypkg.VALUE == 42), over HTTP on indexAddr:80 from a namespace the
// test makes.
func startIndex(t testing.TB) {
	t.Helper()
	requireDaemon(t)
	suffix := strconv.FormatInt(time.Now().UnixNano()%100000, 36)
	ns, veth := "pdix-"+suffix, "pdix"+suffix
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeWheel(t, filepath.Join(dir, "files", "tinypkg-1.0-py3-none-any.whl"))
	os.MkdirAll(filepath.Join(dir, "simple", "tinypkg"), 0o755)
	os.WriteFile(filepath.Join(dir, "simple", "tinypkg", "index.html"),
		[]byte(`<a href="/files/tinypkg-1.0-py3-none-any.whl">tinypkg-1.0-py3-none-any.whl</a>`+"\n"), 0o644)
	run := func(args ...string) {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns)
	var cmd *exec.Cmd
	t.Cleanup(func() {
		if cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		exec.Command("ip", "link", "del", veth).Run()
		exec.Command("ip", "netns", "del", ns).Run()
	})
	run("ip", "link", "add", veth, "type", "veth", "peer", "name", veth+"i")
	run("ip", "link", "set", veth+"i", "netns", ns)
	run("ip", "addr", "add", "198.51.100.1/24", "dev", veth)
	run("ip", "link", "set", veth, "up")
	run("ip", "netns", "exec", ns, "ip", "addr", "add", indexAddr+"/24", "dev", veth+"i")
	run("ip", "netns", "exec", ns, "ip", "link", "set", veth+"i", "up")
	run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
	run("ip", "netns", "exec", ns, "ip", "route", "add", "default", "via", "198.51.100.1")
	cmd = exec.Command("ip", "netns", "exec", ns, "/usr/bin/python3", "-m", "http.server", "80", "--directory", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if exec.Command("ip", "netns", "exec", ns, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/80").Run() == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("index server did not start")
}

// writeWheel writes a minimal pure-Python wheel of tinypkg 1.0.
func writeWheel(t testing.TB, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z := zip.NewWriter(f)
	for _, e := range [][2]string{
		{"tinypkg/__init__.py", "VALUE = 42\n"},
		{"tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n"},
		{"tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: paddock-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"tinypkg-1.0.dist-info/RECORD", "tinypkg/__init__.py,,\ntinypkg-1.0.dist-info/METADATA,,\ntinypkg-1.0.dist-info/WHEEL,,\ntinypkg-1.0.dist-info/RECORD,,\n"},
	} {
		w, err := z.Create(e[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e[1]))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
}

// holdPy connects to the index, sends half a request and waits; it writes
// what ended the wait to /workspace/held.txt.
const holdPy = `
import socket
s = socket.create_connection((%q, 80), timeout=5)
s.sendall(b"GET / HTTP/1.1\r\nHost: held\r\n")
open("/workspace/held.txt", "w").write("open\n")
s.settimeout(None)
try:
    d = s.recv(1)
    r = "data %%r" %% d
except OSError as e:
    r = "cut %%s" %% e
open("/workspace/held.txt", "w").write(r + "\n")
`

// TestNetworkOnOff is the typical agent flow in one sandbox: create
// offline, allow a package index, install from it, switch the network off
// (every connection cut at once, root inside cannot bring it back), then
// on and off again.
func TestNetworkOnOff(t *testing.T) {
	startIndex(t)
	d, err := startDaemon(daemonOptions{
		extraArgs: []string{"--uid-base", strconv.Itoa(crashUIDBase + 760*65536)},
		config: fmt.Sprintf(`{"network": {"pool": "10.91.0.0/16", "proxy_port": 15201, "dns_port": 15253,
			"hosts": {"index.test": [%q]}}}`, indexAddr),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.shutdown()
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(d.logTail(5000))
		}
	})
	ctx := ctxT(t)
	sb := newSandboxOn(t, d, 0, nil)
	sh := func(cmd string) string {
		t.Helper()
		res, err := sb.Exec(ctx, api.ExecRequest{Command: cmd, TimeoutSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Stdout + res.Stderr)
	}
	curl := "curl -s -o /dev/null -w '%{http_code}' --max-time 3 "
	byName, byIP := curl+"http://index.test/simple/tinypkg/", curl+"http://"+indexAddr+"/simple/tinypkg/"
	install := "python3 -m pip install -q --no-cache-dir --disable-pip-version-check --index-url http://index.test/simple/ --trusted-host index.test --target /workspace/site tinypkg >/tmp/pip.log 2>&1; rc=$?; tail -3 /tmp/pip.log; echo rc=$rc"
	links := "ip -o link | awk '{print $2}' | tr -d ':' | tr '\\n' ' '"
	allow := api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{"index.test", indexAddr}}
	off := api.NetworkPolicy{Mode: api.NetworkOff}

	// Offline: only lo, nothing gets out.
	if got := sh(links); got != "lo" {
		t.Errorf("offline links: %q, want lo", got)
	}
	if got := sh(byName + "; echo; " + byIP); got != "000\n000" {
		t.Errorf("offline fetch: %q", got)
	}

	// Switching on is checked against the operator's ceiling like a create.
	for _, bad := range []string{"127.0.0.1/32", "169.254.169.254/32"} {
		err := sb.SetNetwork(ctx, api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{bad}})
		if !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("off → allowlist %s: %v, want bad_request", bad, err)
		}
	}
	if got := sh(links); got != "lo" {
		t.Errorf("links after refused switches: %q, want lo", got)
	}

	// Allow the index: the same sandbox installs from it.
	if err := sb.SetNetwork(ctx, allow); err != nil {
		t.Fatalf("off → allowlist: %v", err)
	}
	if got := sh(byName + "; echo; " + byIP); got != "200\n200" {
		t.Errorf("fetch after allow: %q", got)
	}
	if got := sh(install); !strings.HasSuffix(got, "rc=0") {
		t.Fatalf("pip install from the index: exit %q", got)
	}
	if got := sh("PYTHONPATH=/workspace/site python3 -c 'import tinypkg; print(tinypkg.VALUE)'"); got != "42" {
		t.Fatalf("installed package: %q", got)
	}
	held, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"python3", "-c", fmt.Sprintf(holdPy, indexAddr)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh("for i in $(seq 50); do grep -q open /workspace/held.txt 2>/dev/null && break; sleep 0.1; done; cat /workspace/held.txt"); got != "open" {
		t.Fatalf("held connection: %q", got)
	}

	// Off: the held connection is cut, by name and by IP nothing answers,
	// and root inside cannot bring the interface or a route back.
	if err := sb.SetNetwork(ctx, off); err != nil {
		t.Fatalf("allowlist → off: %v", err)
	}
	if got := sh("for i in $(seq 100); do grep -q cut /workspace/held.txt && break; sleep 0.1; done; cat /workspace/held.txt"); !strings.HasPrefix(got, "cut") {
		t.Errorf("held connection after off: %q, want cut", got)
	} else {
		t.Logf("held connection after off: %s", got)
	}
	held.Wait(ctx, 10*time.Second)
	if got := sh(byName + "; echo; " + byIP); got != "000\n000" {
		t.Errorf("fetch after off: %q", got)
	}
	if got := sh(install); strings.HasSuffix(got, "rc=0") {
		t.Errorf("pip install after off succeeded")
	}
	if got := sh(links); got != "lo" {
		t.Errorf("links after off: %q, want lo", got)
	}
	for _, cmd := range []string{
		"ip link add eth0 type veth peer name eth1",
		"ip link add dummy0 type dummy",
		"ip route add default dev lo",
		"ip addr add 10.91.0.2/30 dev lo",
		"ip link set lo down",
	} {
		if got := sh(cmd + " 2>&1; echo rc=$?"); !strings.Contains(got, "Operation not permitted") {
			t.Errorf("root inside: %s: %q, want Operation not permitted", cmd, got)
		}
	}
	if got := sh(byName + "; echo; " + byIP); got != "000\n000" {
		t.Errorf("fetch after root's attempts: %q", got)
	}
	info, err := d.client(0).Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Network.Mode != api.NetworkOff {
		t.Errorf("stored policy after off: %+v", info.Network)
	}

	// And on again (full this time), then off, as often as asked, with
	// the daemon killed (-9) and restarted in between: the offline
	// namespace and the lease outlive it.
	restart := func() {
		t.Helper()
		d.kill9()
		if err := d.start(); err != nil {
			t.Fatal(err)
		}
	}
	restart()
	if err := sb.SetNetwork(ctx, api.NetworkPolicy{Mode: api.NetworkFull}); err != nil {
		t.Fatalf("off → full after a restart: %v", err)
	}
	if got := sh(byIP); got != "200" {
		t.Errorf("fetch after full: %q", got)
	}
	restart()
	if got := sh(byIP); got != "200" {
		t.Errorf("fetch in full after a restart: %q", got)
	}
	if err := sb.SetNetwork(ctx, off); err != nil {
		t.Fatalf("full → off after a restart: %v", err)
	}
	if got := sh(byIP); got != "000" {
		t.Errorf("fetch after the second off: %q", got)
	}
	if got := sh("echo hi > /workspace/after.txt && cat /workspace/after.txt"); got != "hi" {
		t.Errorf("sandbox after switching: %q", got)
	}
}
