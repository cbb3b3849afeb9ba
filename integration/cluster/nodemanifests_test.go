package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/cluster"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// labOverlay is the kustomize overlay of deploy/kubernetes for the node
// lab: the locally built image (never pulled), the state hostPath on the
// lab's shared bind mount, a cgroup parent and uid range of its own, and a
// NodePort Service for the gateways (labNodePort). The API server is
// reached as in any cluster, at the `kubernetes` Service through the
// lab's kube-proxy.
const labOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%[1]q, nodeport.yaml]
images: [{name: paddock, newName: localhost/paddock, newTag: dev}]
patches:
  - target: {kind: DaemonSet, name: paddockd}
    patch: |-
      - {op: replace, path: /spec/template/spec/volumes/0/hostPath/path, value: %[2]q}
      - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: --cgroup-parent=paddock-k8s-node-ds}
      - {op: add, path: /spec/template/spec/containers/0/args/-, value: --uid-base=%[3]d}
  - target: {kind: Deployment, name: paddock-gateway}
    patch: |-
      - {op: replace, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
`

// TestManifestsNestedSandbox applies deploy/kubernetes (DaemonSet, gateway,
// RBAC, CRD) to the real node with the lab overlay; paddockd runs in its
// privileged pod on the node's network, registers itself with its
// ServiceAccount's rights, and runs a sandbox nested in the pod (runc in
// the pod); exec answers; then the gateway Deployment serves through its
// Service's ClusterIP and a NodePort (checkGatewayService, kube-proxy of
// the lab), also with one of its two pods deleted; the deletes, then the
// DaemonSet's removal, leave nothing (scripts/k8s-node.sh check afterwards).
func TestManifestsNestedSandbox(t *testing.T) {
	kc, kcPath := requireNode(t)
	kubectl := filepath.Join(*k8sBin, "kubectl")
	repo, err := filepath.Abs("../../deploy/kubernetes")
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
		fmt.Appendf(nil, labOverlay, kustomizeRel(t, dir, repo), filepath.Join(*k8sNode, "state"), int64(1<<20)+3000*65536), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "nodeport.yaml"), []byte(labNodePort), 0o644))
	out, err := exec.Command(kubectl, "--kubeconfig", kcPath, "apply", "-k", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k (deploy/kubernetes + lab overlay): %v\n%s", err, out)
	}
	t.Cleanup(func() { removeManifests(t, kc, kubectl, kcPath, dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitCRD(t, ctx, kc)
	key, _, err := cluster.CreateKey(ctx, kc, ns, "alice")
	must(t, err)
	url := "http://" + nodeIP.String() + ":7419"
	start := time.Now()
	for {
		if resp, err := http.Get(url + "/v1/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("paddockd of the DaemonSet never served at %s; pods:\n%s", url, podsOf(kubectl, kcPath))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("DaemonSet paddockd serving %v after apply", time.Since(start).Round(time.Millisecond))
	c := client.New(url, key)
	var id string
	for id == "" {
		t0 := time.Now()
		sb, err := c.Create(ctx, &api.CreateSandboxRequest{})
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no nested sandbox: %v", err)
			}
			t.Logf("create (the node may not have synced the key yet): %v", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		id = sb.ID
		o, err := exec1(ctx, c, id, "echo nested-ok; id -u")
		if err != nil || o != "nested-ok\n0" {
			t.Fatalf("exec in the nested sandbox: %q %v", o, err)
		}
		t.Logf("nested sandbox (runc inside the paddockd pod): create -> first result %v", time.Since(t0).Round(time.Millisecond))
	}
	var sb struct {
		Spec struct {
			Node string `json:"node"`
		} `json:"spec"`
	}
	// The node mirrors its records on a poke after the create and every
	// 2 s: a create answered from the warm pool (with its first result in
	// about 20 ms) can be read back before the mirror ran.
	for {
		err := kc.Get(ctx, "/apis/paddock.dev/v1alpha1/namespaces/"+ns+"/sandboxes/"+id, &sb)
		if err == nil {
			break
		}
		if !kube.IsNotFound(err) || ctx.Err() != nil {
			t.Fatalf("the nested sandbox's Sandbox resource: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sb.Spec.Node != "lab-node" {
		t.Errorf("Sandbox resource names node %q, want lab-node", sb.Spec.Node)
	}
	if err := c.Sandbox(id).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	checkGatewayService(t, ctx, kc, kubectl, kcPath, key)
	t.Logf("pods:\n%s", podsOf(kubectl, kcPath))
}

// removeManifests deletes what the overlay applied and waits until the
// paddockd pod is gone (it ends with no sandbox left, removing its cgroup
// parent).
func removeManifests(t *testing.T, kc *kube.Client, kubectl, kcPath, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kcPath, "delete", "-k", dir, "--wait=false").CombinedOutput(); err != nil {
		t.Errorf("kubectl delete -k: %v\n%s", err, out)
	}
	for {
		var l struct {
			Items []struct{} `json:"items"`
		}
		err := kc.Get(ctx, "/api/v1/namespaces/"+ns+"/pods?labelSelector=app.kubernetes.io/name%3Dpaddockd", &l)
		if err == nil && len(l.Items) == 0 || kube.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Errorf("the paddockd pod did not go away: %v", err)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func podsOf(kubectl, kcPath string) string {
	out, _ := exec.Command(kubectl, "--kubeconfig", kcPath, "get", "pods", "-A", "-o", "wide").CombinedOutput()
	return strings.TrimSpace(string(out))
}
