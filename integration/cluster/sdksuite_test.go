package cluster_test

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var suiteBin = flag.String("integration.test", "", "the compiled integration suite (go test -c ./integration); built into a temp dir when empty")

// sdkSuite is the part of the single-host Go SDK suite (package
// integration) that uses nothing but the API: sandboxes created, exec
// (argv, shell, stdin, streaming, timeouts), files, background processes,
// ports (key and signed URLs, WebSocket upgrade), code contexts, terminals, signals to PID 1, tenant isolation, lifecycle and bad input. The tests that
// reach into the daemon (its state dir, its process, its logs) stay in the
// single-host run. TestFileWatch runs too since the gateway bounds the
// socket buffers of streams (proxy.go): autotuned ones could hold all
// 20000 events of its "overflow is bounded" case, so no overflow came and
// the test waited for one.
var sdkSuite = []string{
	"TestConformance", "TestTenantIsolation", "TestLifecycle", "TestLeaseExpiryReaps", "TestBadInput",
	"TestBackgroundProcesses", "TestPorts",
	"TestCodePython", "TestCodeContexts", "TestCodeJavaScriptAndBash",
	"TestGuestSignalsToPID1", "TestGuestManyBackgroundProcesses", "TestTerminalLimit", "TestFileWatch",
}

// TestSDKSuiteThroughGateway runs those tests, unchanged, against a
// gateway of a three-node cluster: the same binary as the single-host
// run, pointed at the gateway with -paddock.url.
func TestSDKSuiteThroughGateway(t *testing.T) {
	l := startLab(t, 3, 2)
	bin := *suiteBin
	if bin == "" {
		bin = filepath.Join(tempDir(t), "integration.test")
		build := exec.Command("go", "test", "-c", "-o", bin, "../../integration")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go test -c ./integration: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "-test.count=1", "-test.timeout=8m", "-test.v",
		"-test.run", "^("+strings.Join(sdkSuite, "|")+")$",
		"-paddock.url", l.gwURLs[1], "-paddock.keys", strings.Join(l.keys, ","))
	cmd.Dir = "../../integration" // the suite's testdata
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	passed := len(topLevelPass.FindAll(out, -1))
	t.Logf("SDK suite through the gateway: %d top-level tests passed", passed)
	for _, m := range overflowLine.FindAll(out, -1) {
		t.Logf("TestFileWatch through the gateway: %s", strings.TrimSpace(string(m)))
	}
	if err != nil {
		t.Fatalf("SDK suite through the gateway: %v\n%s", err, tailOf(out, 20000))
	}
	if passed != len(sdkSuite) {
		t.Fatalf("SDK suite: %d of %d tests passed\n%s", passed, len(sdkSuite), tailOf(out, 20000))
	}
}

// overflowLine is TestFileWatch's figure of its "overflow is bounded" case.
var overflowLine = regexp.MustCompile(`\d+ files: \d+ create events, \d+ overflow events`)

// topLevelPass matches the verdict line of a passed top-level test (subtests are indented).
var topLevelPass = regexp.MustCompile(`(?m)^--- PASS: Test`)

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
