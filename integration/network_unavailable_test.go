package integration

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// networkUnavailableUIDBase keeps TestNetworkCleanupWhenUnavailable's uid
// range clear of every other test's.
const networkUnavailableUIDBase = crashUIDBase + 800*65536

// TestNetworkCleanupWhenUnavailable: a daemon restarted while its egress
// proxy's port is taken runs without networking, but the network
// namespace a sandbox got in the earlier run is still removed when that
// sandbox is deleted (it used to stay pinned on the host until a later
// start with networking).
func TestNetworkCleanupWhenUnavailable(t *testing.T) {
	requireDaemon(t)
	const proxyPort, dnsPort = 25101, 25153
	d, err := startDaemon(daemonOptions{
		config:    `{"network": {"proxy_port": ` + strconv.Itoa(proxyPort) + `, "dns_port": ` + strconv.Itoa(dnsPort) + `}}`,
		extraArgs: []string{"--uid-base", strconv.Itoa(networkUnavailableUIDBase), "--max-sandboxes", "4", "--warm-pool", "0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.shutdown)
	sb := newSandboxOn(t, d, 0, nil)
	traces := func() hostTraces {
		return tracesOf(d.stateDir, []string{sb.ID}, networkUnavailableUIDBase, networkUnavailableUIDBase+4*65536)
	}
	if h := traces(); h.Netns != 1 {
		t.Fatalf("no pinned namespace with networking on (%+v); daemon log:\n%s", h, d.logTail(2000))
	}
	// A clean stop leaves the sandbox running and its namespace pinned.
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	ln, err := net.Listen("tcp", "0.0.0.0:"+strconv.Itoa(proxyPort))
	if err != nil {
		t.Fatalf("take the proxy's port: %v", err)
	}
	defer ln.Close()
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.log.String(), "networking unavailable") {
		t.Fatalf("the restarted daemon has networking; log:\n%s", d.logTail(2000))
	}
	if err := sb.Kill(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for h := traces(); !h.zero(); h = traces() {
		if time.Now().After(deadline) {
			t.Fatalf("%s's namespace still pinned (%+v) 30 s after the delete; daemon log:\n%s", sb.ID, h, d.logTail(2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
