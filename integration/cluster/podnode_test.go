package cluster_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// The real-node tests (make k8s-node-test): a kubelet + containerd + runc +
// CNI node brought up by scripts/k8s-node.sh in its own network namespace,
// which the test process runs in (the pod network is reachable from it).
var k8sNode = flag.String("k8s.node", "", "dir of a real node lab (scripts/k8s-node.sh up: its kubeconfig, images imported); the real-node tests skip without it")

const podNS = "paddock-pods"

// requireNode skips without a node lab and returns its admin client.
func requireNode(t *testing.T) (*kube.Client, string) {
	t.Helper()
	if *k8sNode == "" {
		t.Skip("needs -k8s.node=<lab dir> of scripts/k8s-node.sh up, with the test in the lab's network namespace (make k8s-node-test)")
	}
	if *paddockBin == "" {
		abs, _ := filepath.Abs("../../bin")
		*paddockBin = abs
	}
	kcPath := filepath.Join(*k8sNode, "kubeconfig")
	kc, err := kube.Load(kcPath)
	if err != nil {
		t.Fatal(err)
	}
	return kc, kcPath
}

// ensureNamespace creates namespace name if missing.
func ensureNamespace(t *testing.T, ctx context.Context, kc *kube.Client, name string) {
	t.Helper()
	err := kc.Create(ctx, "/api/v1/namespaces", map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name}}, nil)
	if err != nil && !kube.IsConflict(err) {
		t.Fatal(err)
	}
}

// startPodMode runs paddockd --backend=pod against the node lab and
// returns a client with a fresh key.
func startPodMode(t *testing.T, kcPath string, extra ...string) (*client.Client, *proc) {
	t.Helper()
	dir, err := os.MkdirTemp("", "paddock-k8s-podmode-")
	must(t, err)
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	out, err := exec.Command(filepath.Join(*paddockBin, "paddockd"), "keys", "create", "--state-dir", dir, "--name", "alice").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := append([]string{"serve", "--backend=pod", "--state-dir", dir, "--listen", addr,
		"--pod-kubeconfig", kcPath, "--pod-namespace", podNS, "--pod-agent-image", "localhost/paddock-agent:dev",
		"--pod-image", "localhost/busybox:lab", "--pod-image-pull-policy", "Never", "--pod-client-cidrs", "10.200.0.0/24",
		"--max-sandboxes", "8", "--max-sandboxes-per-key", "-1"}, extra...)
	p := startProc(t, dir, "paddockd-pod", filepath.Join(*paddockBin, "paddockd"), args...)
	t.Cleanup(func() { p.stop(15) })
	waitHealthy(t, "http://"+addr, p)
	return client.New("http://"+addr, strings.TrimSpace(string(out))), p
}

// TestPodModeAPI drives paddockd --backend=pod through the REST API on the
// real node: create, exec, files, metrics from the agent's /stats, the
// per-sandbox Secret (owned by the Pod, not in its env) and NetworkPolicy,
// 501 for what pod mode cannot do, delete removing all three objects,
// and a lease expiry deleting the Pod.
func TestPodModeAPI(t *testing.T) {
	kc, kcPath := requireNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// the Role of deploy/kubernetes/pod-mode, and paddockd on its ServiceAccount's token: the verbs are enough
	repo, err := filepath.Abs("../../deploy/kubernetes/pod-mode/rbac")
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), fmt.Appendf(nil,
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources: [%q]\n", podNS, kustomizeRel(t, dir, repo)), 0o644))
	ensureNamespace(t, ctx, kc, podNS)
	if out, err := exec.Command(filepath.Join(*k8sBin, "kubectl"), "--kubeconfig", kcPath, "apply", "-k", dir).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k deploy/kubernetes/pod-mode/rbac: %v\n%s", err, out)
	}
	c, _ := startPodMode(t, saKubeconfigIn(t, ctx, kc, kcPath, dir, podNS, "paddock-pods"))

	var firsts []time.Duration
	sb, first := createAndRun(t, ctx, c, api.CreateSandboxRequest{})
	firsts = append(firsts, first)
	id := sb.ID
	s := c.Sandbox(id)
	if _, err := s.Files().Write(ctx, "/workspace/a.txt", []byte("pod-files"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Files().Read(ctx, "/workspace/a.txt"); err != nil || string(b) != "pod-files" {
		t.Fatalf("read back %q %v", b, err)
	}
	if o, err := exec1(ctx, c, id, "cat /workspace/a.txt; echo; hostname"); err != nil || o != "pod-files\nsandbox" {
		t.Fatalf("exec: %q %v", o, err)
	}
	if o, _ := exec1(ctx, c, id, "env | grep -c PADDOCK_AGENT_TOKEN || true"); o != "0" {
		t.Fatalf("the agent token is in the sandbox's env: %q", o)
	}
	if _, err := exec1(ctx, c, id, "head -c 8000000 /dev/zero | cat > /dev/null; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"); err != nil {
		t.Fatal(err)
	}
	m, err := s.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.MemoryBytes <= 0 || m.CPUSeconds <= 0 {
		t.Fatalf("metrics from the agent's /stats: memory %d, cpu %.3f s", m.MemoryBytes, m.CPUSeconds)
	}
	t.Logf("metrics: memory %d B, cpu %.3f s", m.MemoryBytes, m.CPUSeconds)
	checkPodObjects(t, ctx, kc, id)

	// 501 with a reason for what needs node mode
	for name, call := range map[string]func() error{
		"pause": func() error { return s.Pause(ctx) },
		"stop":  func() error { return s.Stop(ctx, 0) },
		"network allowlist": func() error {
			_, err := c.Create(ctx, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"example.com"}}})
			return err
		},
		"network full": func() error {
			_, err := c.Create(ctx, &api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "full"}})
			return err
		},
	} {
		err := call()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Code != api.CodeNotSupported || ae.Message == "" {
			t.Errorf("%s: want 501 not_supported with a reason, got %v", name, err)
		} else {
			t.Logf("%s: %s", name, ae.Message)
		}
	}

	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, kc, id)

	// create → first result, a few more times (the figure of docs/kubernetes.md)
	for range 9 {
		sb, first := createAndRun(t, ctx, c, api.CreateSandboxRequest{})
		firsts = append(firsts, first)
		if err := c.Sandbox(sb.ID).Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	t.Logf("pod mode create -> first exec result on the real node: median %v, min %v, max %v (n=%d)",
		firsts[len(firsts)/2], firsts[0], firsts[len(firsts)-1], len(firsts))

	// a lease that ends deletes the Pod (the manager's reaper)
	sb, _ = createAndRun(t, ctx, c, api.CreateSandboxRequest{TimeoutSeconds: 3})
	waitGone(t, ctx, kc, sb.ID)
}

// createAndRun creates a sandbox and runs one command, returning how long
// create → first result took.
func createAndRun(t *testing.T, ctx context.Context, c *client.Client, req api.CreateSandboxRequest) (*client.Sandbox, time.Duration) {
	t.Helper()
	start := time.Now()
	sb, err := c.Create(ctx, &req)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := exec1(ctx, c, sb.ID, "echo pod-ok"); err != nil || o != "pod-ok" {
		t.Fatalf("exec: %q %v", o, err)
	}
	return sb, time.Since(start)
}

// checkPodObjects checks sandbox id's Secret (token, owned by the Pod, not
// in the Pod's env) and NetworkPolicy (default deny, ingress to the agent
// port only, owned by the Pod).
func checkPodObjects(t *testing.T, ctx context.Context, kc *kube.Client, id string) {
	t.Helper()
	type meta struct {
		UID             string `json:"uid"`
		OwnerReferences []struct {
			Kind string `json:"kind"`
			UID  string `json:"uid"`
		} `json:"ownerReferences"`
	}
	var p struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			Containers []struct {
				Env []struct {
					Name string `json:"name"`
				} `json:"env"`
			} `json:"containers"`
		} `json:"spec"`
	}
	base := "/api/v1/namespaces/" + podNS
	must(t, kc.Get(ctx, base+"/pods/paddock-"+id, &p))
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if strings.Contains(e.Name, "TOKEN") {
				t.Errorf("the Pod's env has %s", e.Name)
			}
		}
	}
	owned := func(what string, m meta) {
		if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Pod" || m.OwnerReferences[0].UID != p.Metadata.UID {
			t.Errorf("%s is not owned by the Pod %s: %+v", what, p.Metadata.UID, m.OwnerReferences)
		}
	}
	var sec struct {
		Metadata meta              `json:"metadata"`
		Data     map[string][]byte `json:"data"`
	}
	must(t, kc.Get(ctx, base+"/secrets/paddock-"+id, &sec))
	if len(sec.Data["token"]) != 64 {
		t.Errorf("secret token of %d bytes", len(sec.Data["token"]))
	}
	owned("secret", sec.Metadata)
	var np struct {
		Metadata meta `json:"metadata"`
		Spec     struct {
			PodSelector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"podSelector"`
			PolicyTypes []string `json:"policyTypes"`
			Ingress     []struct {
				From  []map[string]any `json:"from"`
				Ports []struct {
					Port int `json:"port"`
				} `json:"ports"`
			} `json:"ingress"`
			Egress []any `json:"egress"`
		} `json:"spec"`
	}
	must(t, kc.Get(ctx, "/apis/networking.k8s.io/v1/namespaces/"+podNS+"/networkpolicies/paddock-"+id, &np))
	owned("network policy", np.Metadata)
	sp := np.Spec
	if sp.PodSelector.MatchLabels["paddock.dev/sandbox"] != id || !slices.Contains(sp.PolicyTypes, "Egress") ||
		!slices.Contains(sp.PolicyTypes, "Ingress") || len(sp.Egress) != 0 || len(sp.Ingress) != 1 ||
		len(sp.Ingress[0].Ports) != 1 || sp.Ingress[0].Ports[0].Port != 7070 || len(sp.Ingress[0].From) == 0 {
		t.Errorf("network policy is not default-deny with ingress to the agent port only: %+v", sp)
	}
}

// waitGone waits until sandbox id's Pod, Secret and NetworkPolicy are gone.
func waitGone(t *testing.T, ctx context.Context, kc *kube.Client, id string) {
	t.Helper()
	paths := []string{"/api/v1/namespaces/" + podNS + "/pods/paddock-" + id, "/api/v1/namespaces/" + podNS + "/secrets/paddock-" + id,
		"/apis/networking.k8s.io/v1/namespaces/" + podNS + "/networkpolicies/paddock-" + id}
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range paths {
		for {
			err := kc.Get(ctx, p, nil)
			if kube.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still there (%v)", p, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// kustomizeRel is dir's path to the directory target, as a kustomization in
// dir must name it (kubectl's kustomize rejects an absolute resource root).
func kustomizeRel(t *testing.T, dir, target string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, target)
	must(t, err)
	return rel
}

// nodeIP is the lab node's address (scripts/k8s-node/node-up.sh).
var nodeIP = net.IPv4(10, 200, 0, 1)
