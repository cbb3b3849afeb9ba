package pod_test

import (
	"context"
	"flag"
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
)

// TestConformance runs the shared Backend conformance suite against Pods
// on a real node (kubelet + containerd + runc + CNI). The test process
// must reach the pod network (in the lab: run it in the lab's netns).
func TestConformance(t *testing.T) {
	var kc *kube.Client
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
			b, err := pod.New(pod.Config{Kube: kc, Namespace: *namespace, AgentImage: *agentImage,
				Templates:       map[string]pod.Template{"base": {Image: *baseImage}},
				ImagePullPolicy: "Never"})
			if err != nil {
				t.Fatal(err)
			}
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
	backendtest.Run(t, h)
}
