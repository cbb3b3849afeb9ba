package pod_test

import (
	"context"
	"flag"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/backend/backendtest"
	"github.com/paddock-sandbox/paddock/internal/backend/pod"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

var (
	kubeconfig = flag.String("pod.kubeconfig", "", "kubeconfig of a cluster with a real node (the k8s-lab node: scripts/k8s-node.sh); the suite skips without it")
	namespace  = flag.String("pod.namespace", "default", "namespace of the sandbox Pods")
	agentImage = flag.String("pod.agent-image", "localhost/paddock-agent:dev", "image holding /paddock-agent")
	baseImage  = flag.String("pod.base-image", "localhost/busybox:lab", "image of the base template")
	ctrBin     = flag.String("pod.ctr", "", "ctr binary; with -pod.containerd it kills a sandbox's container behind the backend's back (the Kill and Restart subtests)")
	ctrSocket  = flag.String("pod.containerd", "", "the node's containerd socket")
)

// TestConformance runs the shared Backend conformance suite against Pods
// on a real node (kubelet + containerd + runc + CNI). The test process
// must reach the pod network (in the lab: run it in the lab's netns).
func TestConformance(t *testing.T) {
	var kc *kube.Client
	newBackend := func(t *testing.T) sandbox.Backend {
		b, err := pod.New(pod.Config{Kube: kc, Namespace: *namespace, AgentImage: *agentImage,
			Templates:       map[string]pod.Template{"base": {Image: *baseImage}},
			ImagePullPolicy: "Never"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	h := backendtest.Harness{
		Unavailable: func() string {
			if *kubeconfig == "" {
				return "needs -pod.kubeconfig of a cluster with a real node whose pod network this host reaches (see docs/kubernetes.md, pod backend)"
			}
			var err error
			if kc, err = kube.Load(*kubeconfig); err != nil {
				return err.Error()
			}
			return ""
		},
		New: func(t *testing.T) sandbox.Backend {
			b := newBackend(t)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				ids, _ := b.List(ctx)
				for _, id := range ids {
					if err := b.Destroy(ctx, id); err != nil {
						t.Errorf("cleanup %s: %v", id, err)
					}
				}
			})
			return b
		},
	}
	if *ctrBin != "" && *ctrSocket != "" {
		h.Kill = func(t *testing.T, b sandbox.Backend, id string) { killContainer(t, kc, id) }
		h.Restart = func(t *testing.T, b sandbox.Backend) sandbox.Backend { return newBackend(t) }
	}
	backendtest.Run(t, h)
}

// killContainer SIGKILLs every process of sandbox id's container through
// the node's containerd, as an OOM kill of its PID 1 would.
func killContainer(t *testing.T, kc *kube.Client, id string) {
	t.Helper()
	var p struct {
		Status struct {
			ContainerStatuses []struct {
				Name        string `json:"name"`
				ContainerID string `json:"containerID"`
			} `json:"containerStatuses"`
		} `json:"status"`
	}
	if err := kc.Get(context.Background(), "/api/v1/namespaces/"+*namespace+"/pods/paddock-"+id, &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "sandbox" {
			cid := strings.TrimPrefix(c.ContainerID, "containerd://")
			out, err := exec.Command(*ctrBin, "-a", *ctrSocket, "-n", "k8s.io", "tasks", "kill", "-a", "-s", "SIGKILL", cid).CombinedOutput()
			if err != nil {
				t.Fatalf("ctr tasks kill %s: %v: %s", cid, err, out)
			}
			return
		}
	}
	t.Fatalf("pod of %s has no sandbox container status", id)
}
