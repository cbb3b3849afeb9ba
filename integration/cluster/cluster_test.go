// Package cluster_test is the end-to-end test of cluster mode on a real
// Kubernetes control plane (etcd + kube-apiserver from the lab's cached
// binaries): three paddockd nodes and two gateways on this host. Run it
// with `make k8s-test` (root; needs `make build` and the lab binaries).
package cluster_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/backend/container"
	"github.com/paddock-sandbox/paddock/internal/cluster"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

var (
	paddockBin = flag.String("paddock.bin", "", "directory holding paddockd, paddock-gateway, paddock-agent and runc (default ../../bin)")
	k8sBin     = flag.String("k8s.bin", "/var/cache/paddock/k8s-v1.37.2/bin", "directory holding etcd and kube-apiserver (the k8s-lab build, cached by version)")
)

const (
	ns           = "paddock"
	leaseSeconds = 6
)

// lab is the running cluster of a test.
type lab struct {
	t        testing.TB
	cp       *controlPlane
	kc       *kube.Client
	nodes    []*node
	gateways []*proc
	gwURLs   []string
	keys     []string // alice, bob
	nodeArgs []string // extra paddockd flags of every node
	// configs are the nodes' config files by index (default: networking off).
	configs map[int]string
	// e2b: nodes and gateways serve the E2B endpoint too (gwE2B: the gateways').
	e2b   bool
	gwE2B []string
	// e2bDomain is the nodes' and gateways' --e2b-domain (with e2b).
	e2bDomain string
	// nodeKC and gwKC are the kubeconfigs nodes and gateways run with.
	nodeKC, gwKC string
}

type node struct {
	name, stateDir, listen string
	e2bListen              string // with lab.e2b
	p                      *proc
}

func requireLab(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cluster e2e needs root (it runs paddockd, runc, mounts and cgroups)")
	}
	if *paddockBin == "" {
		abs, _ := filepath.Abs("../../bin")
		*paddockBin = abs
	}
	for _, f := range []string{filepath.Join(*paddockBin, "paddockd"), filepath.Join(*paddockBin, "paddock-gateway"),
		filepath.Join(*k8sBin, "etcd"), filepath.Join(*k8sBin, "kube-apiserver")} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("%s missing: run `make build` and the k8s-lab build (see docs/kubernetes.md, `make k8s-test`)", f)
		}
	}
}

// startLab starts the control plane, the given numbers of nodes (with
// nodeArgs added to their flags) and gateways, and two keys.
func startLab(t testing.TB, nodes, gateways int, nodeArgs ...string) *lab {
	l := newLab(t, nodeArgs...)
	l.setup()
	l.addNodes(nodes)
	l.addGateways(gateways)
	return l
}

// setup installs the CRD and makes the keys alice and bob.
func (l *lab) setup() {
	t := l.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.Install(ctx, l.kc, ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "bob"} {
		secret, _, err := cluster.CreateKey(ctx, l.kc, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		l.keys = append(l.keys, secret)
	}
}

// newLab starts the control plane only; nodes and gateways use the admin
// kubeconfig unless nodeKC / gwKC are set before they start.
func newLab(t testing.TB, nodeArgs ...string) *lab {
	requireLab(t)
	l := &lab{t: t, cp: startControlPlane(t, *k8sBin), nodeArgs: nodeArgs}
	l.nodeKC, l.gwKC = l.cp.kubeconfig, l.cp.kubeconfig
	var err error
	if l.kc, err = kube.Load(l.cp.kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.cleanup)
	return l
}

func (l *lab) addNodes(n int) {
	for range n {
		i := len(l.nodes)
		dir, err := os.MkdirTemp("", "paddock-k8s-node-")
		must(l.t, err)
		os.Chmod(dir, 0o755) // removed by cleanup once the node is stopped, not by t.Cleanup
		nd := &node{name: fmt.Sprintf("node%d", i+1), stateDir: dir, listen: fmt.Sprintf("127.0.0.1:%d", freePort(l.t))}
		if l.e2b {
			nd.e2bListen = fmt.Sprintf("127.0.0.1:%d", freePort(l.t))
		}
		l.nodes = append(l.nodes, nd)
		l.startNode(i)
	}
}

func (l *lab) addGateways(n int) {
	for range n {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(l.t))
		args := []string{"serve", "--kubeconfig", l.gwKC, "--namespace", ns, "--listen", addr, "--cache-for", "500ms"}
		if l.e2b {
			e := fmt.Sprintf("127.0.0.1:%d", freePort(l.t))
			args = append(args, "--e2b-listen", e)
			if l.e2bDomain != "" {
				args = append(args, "--e2b-domain", l.e2bDomain)
			}
			l.gwE2B = append(l.gwE2B, "http://"+e)
		}
		g := startProc(l.t, l.cp.dir, fmt.Sprintf("gateway%d", len(l.gateways)+1),
			filepath.Join(*paddockBin, "paddock-gateway"), args...)
		l.gateways = append(l.gateways, g)
		l.gwURLs = append(l.gwURLs, "http://"+addr)
		waitHealthy(l.t, "http://"+addr, g)
	}
}

// startNode starts (or restarts, on the same state dir) node i.
func (l *lab) startNode(i int) {
	n := l.nodes[i]
	cfg := filepath.Join(n.stateDir, "config.json")
	conf := `{"network": {"disabled": true}}`
	if c, ok := l.configs[i]; ok {
		conf = c
	}
	must(l.t, os.WriteFile(cfg, []byte(conf), 0o600))
	args := append([]string{"serve", "--state-dir", n.stateDir, "--listen", n.listen, "--config", cfg,
		"--uid-base", fmt.Sprint(1<<20 + (i+1)*64*65536), "--max-sandboxes", "16", "--max-sandboxes-per-key", "-1",
		"--kubeconfig", l.nodeKC, "--cluster-namespace", ns, "--node-name", n.name,
		"--lease-seconds", fmt.Sprint(leaseSeconds)}, l.nodeArgs...)
	if n.e2bListen != "" {
		args = append(args, "--e2b-listen", n.e2bListen)
		if l.e2bDomain != "" {
			args = append(args, "--e2b-domain", l.e2bDomain)
		}
	}
	n.p = startProc(l.t, l.cp.dir, n.name+fmt.Sprintf("-%d", time.Now().UnixNano()%1000), filepath.Join(*paddockBin, "paddockd"), args...)
	waitHealthy(l.t, "http://"+n.listen, n.p)
}

func waitHealthy(t testing.TB, url string, p *proc) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url + "/v1/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if !p.alive() {
			break
		}
	}
	t.Fatalf("%s did not become healthy:\n%s", p.name, p.tail(4000))
}

// client is key k's client through gateway g.
func (l *lab) client(g, k int) *client.Client { return client.New(l.gwURLs[g], l.keys[k]) }

// nodeOf is the node the Sandbox resource of id names.
func (l *lab) nodeOf(ctx context.Context, id string) string {
	var sb cluster.Sandbox
	if err := l.kc.Get(ctx, "/apis/paddock.dev/v1alpha1/namespaces/"+ns+"/sandboxes/"+id, &sb); err != nil {
		l.t.Fatalf("sandbox resource %s: %v", id, err)
	}
	return sb.Spec.Node
}

// statusOf is the state the owning node wrote into the Sandbox resource.
func (l *lab) statusOf(ctx context.Context, id string) string {
	var sb cluster.Sandbox
	if err := l.kc.Get(ctx, "/apis/paddock.dev/v1alpha1/namespaces/"+ns+"/sandboxes/"+id, &sb); err != nil || sb.Status == nil {
		return ""
	}
	return sb.Status.State
}

// cleanup deletes every sandbox on every live node directly, then stops
// the nodes and gateways (the control plane's own cleanup runs after).
func (l *lab) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, n := range l.nodes {
		if n.p == nil {
			continue
		}
		if !n.p.alive() { // killed by the test: restart it so its sandboxes go too
			l.startNode(i)
		}
		for _, key := range l.keys {
			c := client.New("http://"+n.listen, key)
			for sb, err := range c.All(ctx, client.ListOptions{}) {
				if err != nil {
					break
				}
				c.Sandbox(sb.ID).Close()
			}
		}
	}
	for _, g := range l.gateways {
		g.stop(syscall.SIGTERM)
	}
	for _, n := range l.nodes {
		if n.p != nil {
			n.p.stop(syscall.SIGTERM)
			if l.t.Failed() {
				l.t.Logf("--- %s log (tail) ---\n%s", n.name, n.p.tail(3000))
			}
		}
		// a deleted sandbox's last processes may take a moment to be reaped
		pids := cgroupProcs(container.DefaultCgroupParent(n.stateDir))
		for start := time.Now(); len(pids) > 0 && time.Since(start) < 15*time.Second; time.Sleep(200 * time.Millisecond) {
			pids = cgroupProcs(container.DefaultCgroupParent(n.stateDir))
		}
		if len(pids) > 0 {
			l.t.Errorf("node %s stopped with processes left in its cgroup: %v", n.name, pids)
		}
		// only now: the node deleted its sandboxes (their mounts live in it)
		if err := os.RemoveAll(n.stateDir); err != nil {
			l.t.Errorf("node %s state: %v", n.name, err)
		}
	}
}

// cgroupProcs lists the processes in the cgroup named parent, or below it,
// in any hierarchy: what a node left running.
func cgroupProcs(parent string) []string {
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cgroup"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(line, "/"+parent) || strings.Contains(line, "/"+parent+"/") {
				pids = append(pids, d.Name())
				break
			}
		}
	}
	return pids
}

func exec1(ctx context.Context, c *client.Client, id, cmd string) (string, error) {
	r, err := c.Sandbox(id).Exec(ctx, api.ExecRequest{Command: cmd})
	if err != nil {
		return "", err
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		return r.Stdout, fmt.Errorf("no clean exit: %s", r.Stderr)
	}
	return strings.TrimSpace(r.Stdout), nil
}

// isLost reports whether err is the gateway's "sandbox lost" answer.
func isLost(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Code == api.CodeUnavailable && strings.Contains(ae.Message, "sandbox lost")
}
