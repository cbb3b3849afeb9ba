package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestE2BSDKThroughGateway runs the unmodified `e2b` npm package (pinned
// in integration/e2b-sdk, the single-host e2b-compat run's) against a
// gateway's E2B endpoint in front of three nodes, node2 the only one with
// the template tpl-e2b: create with that template (placed on node2), a
// template no node has, commands.run, files write/read, the list paged
// across nodes, kill (integration/e2b-sdk/cluster/gateway.test.mjs).
func TestE2BSDKThroughGateway(t *testing.T) {
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node (>= 20) is needed to run the e2b npm package; `make e2b-compat` needs it too")
	}
	sdkDir, err := filepath.Abs("../e2b-sdk")
	must(t, err)
	if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", "e2b", "package.json")); err != nil {
		npm := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		npm.Dir = sdkDir
		if out, err := npm.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in integration/e2b-sdk: %v\n%s", err, out)
		}
	}
	l := newLab(t)
	l.e2b = true
	l.e2bDomain = "e2b.paddock.test"
	l.configs = map[int]string{
		1: `{"network": {"disabled": true}, "templates": {"tpl-e2b": {"runtime": "runc"}}}`,
	}
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin, "--test", "--test-timeout=240000", "--test-reporter=spec", "--test-concurrency=1",
		"cluster/gateway.test.mjs")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(), "E2B_API_URL="+l.gwE2B[0], "E2B_SANDBOX_URL="+l.gwE2B[0], "E2B_API_KEY="+l.keys[0],
		"E2B_DOMAIN="+l.e2bDomain, "PADDOCK_NODE2_E2B=http://"+l.nodes[1].e2bListen)
	out, err := cmd.CombinedOutput()
	t.Logf("e2b npm package through the gateway:\n%s", tailOf(out, 6000))
	if err != nil {
		t.Fatalf("node --test cluster/gateway.test.mjs: %v", err)
	}
	if m := nodePass.FindSubmatch(out); m == nil || string(m[1]) == "0" {
		t.Fatal("node --test reported no passed test")
	}
}

// nodePass is node --test's count of passed tests.
var nodePass = regexp.MustCompile(`ℹ pass (\d+)`)
