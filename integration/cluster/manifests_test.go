package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// TestManifests applies deploy/kubernetes with kubectl (kustomize) to the
// real API server, checks that the DaemonSet, gateway Deployment and
// Service serve the E2B endpoint (checkManifestE2B), then runs a node and
// a gateway (both with their E2B endpoints) with the tokens of the
// manifests' own ServiceAccounts: the Roles are enough (least privilege
// that works), and a key made through the gateway's rights serves a
// sandbox end to end, through the REST API and the E2B endpoint.
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
	checkManifestE2B(t, ctx, l.kc)
	l.nodeKC = l.saKubeconfig(ctx, "paddock-node")
	l.gwKC = l.saKubeconfig(ctx, "paddock-gateway")
	out, err = exec.Command(filepath.Join(*paddockBin, "paddock-gateway"), "keys", "create",
		"--kubeconfig", l.gwKC, "--namespace", ns, "--name", "alice").Output()
	if err != nil {
		t.Fatalf("keys create with the gateway's ServiceAccount: %v", err)
	}
	l.keys = []string{strings.TrimSpace(string(out))}
	l.e2b = true
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
	// the E2B endpoint with the same rights: a create recorded by the gateway, a kill
	e2b := func(method, path string) (int, string) {
		st, _, b := e2bDo(t, ctx, method, l.gwE2B[0]+path, e2bKey(l.keys[0]), []byte(`{"templateID": "base"}`))
		return st, string(b)
	}
	st, b := e2b("POST", "/v2/sandboxes")
	var sb struct {
		SandboxID string `json:"sandboxID"`
	}
	if st != http.StatusCreated || json.Unmarshal([]byte(b), &sb) != nil {
		t.Fatalf("E2B create through the gateway with ServiceAccount credentials: %d %s", st, b)
	}
	if node := l.nodeOf(ctx, sb.SandboxID); node != "node1" {
		t.Fatalf("E2B sandbox resource names node %q", node)
	}
	if st, b := e2b("DELETE", "/sandboxes/"+sb.SandboxID); st != http.StatusNoContent {
		t.Fatalf("E2B kill: %d %s", st, b)
	}
}

// checkManifestE2B checks the applied manifests serve E2B: the DaemonSet's
// paddockd listens with --e2b-listen on a port it declares and advertises
// that port (--e2b-advertise-url), the gateway Deployment listens with
// --e2b-listen on its declared e2b port, and the Service exposes it.
func checkManifestE2B(t *testing.T, ctx context.Context, kc *kube.Client) {
	type container struct {
		Args  []string `json:"args"`
		Ports []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
	}
	var workload struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []container `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	e2bPort := func(what string, c container) int {
		for _, p := range c.Ports {
			if p.Name == "e2b" {
				return p.ContainerPort
			}
		}
		t.Fatalf("%s declares no e2b port: %+v", what, c.Ports)
		return 0
	}
	arg := func(c container, flag string) string {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
		return ""
	}
	must(t, kc.Get(ctx, "/apis/apps/v1/namespaces/"+ns+"/daemonsets/paddockd", &workload))
	ds := workload.Spec.Template.Spec.Containers[0]
	p := strconv.Itoa(e2bPort("the DaemonSet", ds))
	if l, a := arg(ds, "--e2b-listen"), arg(ds, "--e2b-advertise-url"); !strings.HasSuffix(l, ":"+p) || !strings.HasSuffix(a, ":"+p) ||
		!strings.HasPrefix(a, "http://") {
		t.Fatalf("DaemonSet: --e2b-listen=%q --e2b-advertise-url=%q, want both on its e2b port %s", l, a, p)
	}
	must(t, kc.Get(ctx, "/apis/apps/v1/namespaces/"+ns+"/deployments/paddock-gateway", &workload))
	gw := workload.Spec.Template.Spec.Containers[0]
	if l, gp := arg(gw, "--e2b-listen"), e2bPort("the gateway Deployment", gw); !strings.HasSuffix(l, ":"+strconv.Itoa(gp)) {
		t.Fatalf("gateway Deployment: --e2b-listen=%q, want its e2b port %d", l, gp)
	}
	var svc struct {
		Spec struct {
			Ports []struct {
				Name       string `json:"name"`
				TargetPort any    `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	must(t, kc.Get(ctx, "/api/v1/namespaces/"+ns+"/services/paddock", &svc))
	for _, sp := range svc.Spec.Ports {
		if sp.Name == "e2b" && sp.TargetPort == "e2b" {
			return
		}
	}
	t.Fatalf("the paddock Service exposes no e2b port: %+v", svc.Spec.Ports)
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
