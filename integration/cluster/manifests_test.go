package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// TestManifests applies deploy/kubernetes with kubectl (kustomize) to the
// real API server, then runs a node and a gateway with the tokens of the
// manifests' own ServiceAccounts: the Roles are enough (least privilege
// that works), and a key made through the gateway's rights serves a
// sandbox end to end.
func TestManifests(t *testing.T) {
	requireLab(t)
	kubectl := filepath.Join(*k8sBin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("%s missing (the k8s-lab build's kubectl)", kubectl)
	}
	l := newLab(t)
	out, err := exec.Command(kubectl, "--kubeconfig", l.cp.kubeconfig, "apply", "-k", "../../deploy/kubernetes").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k deploy/kubernetes: %v\n%s", err, out)
	}
	t.Logf("applied:\n%s", out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitCRD(t, ctx, l.kc)
	l.nodeKC = l.saKubeconfig(ctx, "paddock-node")
	l.gwKC = l.saKubeconfig(ctx, "paddock-gateway")
	out, err = exec.Command(filepath.Join(*paddockBin, "paddock-gateway"), "keys", "create",
		"--kubeconfig", l.gwKC, "--namespace", ns, "--name", "alice").Output()
	if err != nil {
		t.Fatalf("keys create with the gateway's ServiceAccount: %v", err)
	}
	l.keys = []string{strings.TrimSpace(string(out))}
	l.addNodes(1)
	l.addGateways(1)
	c := l.client(0, 0)
	var sbID string
	for start := time.Now(); time.Since(start) < 15*time.Second; time.Sleep(200 * time.Millisecond) {
		sb, err := c.Create(ctx, &api.CreateSandboxRequest{})
		if err == nil {
			sbID = sb.ID
			break
		}
		t.Logf("create (the node may not have synced the key yet): %v", err)
	}
	if sbID == "" {
		t.Fatal("no create through the gateway with ServiceAccount credentials")
	}
	if o, err := exec1(ctx, c, sbID, "echo rbac-ok"); err != nil || o != "rbac-ok" {
		t.Fatalf("exec: %q %v", o, err)
	}
	if node := l.nodeOf(ctx, sbID); node != "node1" {
		t.Fatalf("sandbox resource names node %q", node)
	}
	if err := c.Sandbox(sbID).Kill(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitCRD waits until the Sandbox resource is served.
func waitCRD(t *testing.T, ctx context.Context, kc *kube.Client) {
	for {
		if kc.Get(ctx, "/apis/paddock.dev/v1alpha1/namespaces/"+ns+"/sandboxes", nil) == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the Sandbox CRD was not served")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// saKubeconfig writes a kubeconfig holding a fresh token of ServiceAccount
// sa (TokenRequest) and returns its path.
func (l *lab) saKubeconfig(ctx context.Context, sa string) string {
	return saKubeconfigIn(l.t, ctx, l.kc, l.cp.kubeconfig, l.cp.dir, ns, sa)
}

// saKubeconfigIn writes into dir a copy of the admin kubeconfig holding a
// fresh token of ServiceAccount namespace/sa instead, and returns its path.
func saKubeconfigIn(t testing.TB, ctx context.Context, kc *kube.Client, adminKC, dir, namespace, sa string) string {
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	req := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"expirationSeconds": 3600}}
	if err := kc.Create(ctx, "/api/v1/namespaces/"+namespace+"/serviceaccounts/"+sa+"/token", req, &tr); err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	admin, err := os.ReadFile(adminKC)
	must(t, err)
	// the admin kubeconfig with the admin token swapped for the ServiceAccount's;
	// the token is in flow form (the lab, `user: {token: X}`) or block form
	// (scripts/k8s-node's kit, `token: X` under `user:`)
	var tok string
	for _, line := range strings.Split(string(admin), "\n") {
		l := strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(l, "user: {token: "); ok {
			tok = strings.TrimSuffix(v, "}")
		} else if v, ok := strings.CutPrefix(l, "token: "); ok {
			tok = strings.TrimSpace(v)
		}
	}
	if tok == "" {
		t.Fatal("no token in the admin kubeconfig")
	}
	p := filepath.Join(dir, sa+".kubeconfig")
	must(t, os.WriteFile(p, []byte(strings.Replace(string(admin), tok, tr.Status.Token, 1)), 0o600))
	return p
}
