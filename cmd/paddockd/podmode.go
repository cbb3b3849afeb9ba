package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/paddock-sandbox/paddock/internal/backend/pod"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/manager"
)

// Backends of --backend.
const (
	backendContainer = "container"
	backendPod       = "pod"
)

// PodConfig configures --backend=pod (docs/kubernetes.md, "Pod mode"):
// every sandbox is a Pod of the Kubernetes API named by Kubeconfig.
type PodConfig struct {
	// Kubeconfig is the kubeconfig file; empty: the pod's service account.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace of the sandbox Pods, Secrets and NetworkPolicies (default
	// the pod's namespace, else "paddock").
	Namespace string `json:"namespace,omitempty"`
	// AgentImage holds the static paddock-agent at /paddock-agent.
	AgentImage string `json:"agent_image,omitempty"`
	// Templates maps template names to images (and RuntimeClasses); it
	// must have "base".
	Templates map[string]PodTemplate `json:"templates,omitempty"`
	// ImagePullPolicy of the sandbox Pods ("" = the cluster's default;
	// "Never" for images imported on the nodes).
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// ClientCIDRs may reach the agents under the sandboxes'
	// NetworkPolicies besides paddockd's and the gateways' pods (a
	// paddockd outside the cluster).
	ClientCIDRs []string `json:"client_cidrs,omitempty"`
}

// PodTemplate is a template of pod mode: an image and an optional
// RuntimeClass (gvisor, kata).
type PodTemplate struct {
	Image        string `json:"image"`
	RuntimeClass string `json:"runtime_class,omitempty"`
}

// podNoNetwork is the 501 message of network modes other than off.
const podNoNetwork = "pod mode (--backend=pod) has network mode off only (a default-deny NetworkPolicy per sandbox); " +
	"allowlists, full egress and secret substitution need node mode (the egress proxy and nftables of paddockd on each node)"

// podFlags registers the pod-mode flags and returns a function that
// applies the ones given over the config file's values.
func podFlags(fs *flag.FlagSet) func(cfg *Config, set map[string]bool) {
	backend := fs.String("backend", backendContainer, `"container" (sandboxes run by an OCI runtime on this host) or "pod" (a Kubernetes Pod per sandbox; see --pod-* and docs/kubernetes.md)`)
	kc := fs.String("pod-kubeconfig", "", "pod mode: kubeconfig of the cluster running the sandbox Pods (default: the pod's service account)")
	ns := fs.String("pod-namespace", "", `pod mode: namespace of the sandbox Pods (default the pod's own, else "paddock")`)
	agentImage := fs.String("pod-agent-image", "", "pod mode: image holding the static /paddock-agent (copied into each sandbox by an init container)")
	image := fs.String("pod-image", "", `pod mode: image of the "base" template (overrides the config's pod.templates.base.image)`)
	runtimeClass := fs.String("pod-runtime-class", "", `pod mode: RuntimeClass of the "base" template (gvisor, kata; default the cluster's)`)
	pull := fs.String("pod-image-pull-policy", "", `pod mode: imagePullPolicy of the sandbox Pods ("Never" for images imported on the nodes)`)
	cidrs := fs.String("pod-client-cidrs", "", "pod mode: comma-separated CIDRs allowed to reach the sandbox agents besides paddockd's and the gateways' pods")
	return func(cfg *Config, set map[string]bool) {
		if set["backend"] || cfg.Backend == "" {
			cfg.Backend = *backend
		}
		p := &cfg.Pod
		if set["pod-kubeconfig"] {
			p.Kubeconfig = *kc
		}
		if set["pod-namespace"] {
			p.Namespace = *ns
		}
		if set["pod-agent-image"] {
			p.AgentImage = *agentImage
		}
		if set["pod-image-pull-policy"] {
			p.ImagePullPolicy = *pull
		}
		if set["pod-client-cidrs"] {
			p.ClientCIDRs = splitList(*cidrs)
		}
		if set["pod-image"] || set["pod-runtime-class"] {
			if p.Templates == nil {
				p.Templates = map[string]PodTemplate{}
			}
			t := p.Templates["base"]
			if set["pod-image"] {
				t.Image = *image
			}
			if set["pod-runtime-class"] {
				t.RuntimeClass = *runtimeClass
			}
			p.Templates["base"] = t
		}
	}
}

// newPodBackend is the pod backend of cfg.Pod.
func newPodBackend(cfg Config, log *slog.Logger) (*pod.Backend, error) {
	p := cfg.Pod
	if p.AgentImage == "" || p.Templates["base"].Image == "" {
		return nil, errors.New("--backend=pod needs --pod-agent-image and --pod-image (or the config's pod.agent_image and pod.templates.base)")
	}
	kc, err := kube.Load(p.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("pod mode: %w", err)
	}
	tpls := map[string]pod.Template{}
	for name, t := range p.Templates {
		if t.Image == "" {
			return nil, fmt.Errorf("pod mode: template %q has no image", name)
		}
		tpls[name] = pod.Template{Image: t.Image, RuntimeClass: t.RuntimeClass}
	}
	return pod.New(pod.Config{Kube: kc, Namespace: p.Namespace, AgentImage: p.AgentImage, Templates: tpls,
		ImagePullPolicy: p.ImagePullPolicy, ClientCIDRs: p.ClientCIDRs, Log: log,
		// the longest lease: a Pod's activeDeadlineSeconds can only be lowered
		MaxLifetime: manager.DefaultConfig().MaxTimeout})
}

// runPod is run for --backend=pod: the same manager, store, keys, REST API,
// E2B endpoint and cluster membership as on one host, over the pod
// backend. What the backend cannot do (pause, stop/start, network modes
// other than off, templates built or imported through the API) answers
// 501 not_supported.
func runPod(cfg Config, log *slog.Logger) error {
	if cfg.MaxSandboxes < 1 {
		return errors.New("--max-sandboxes must be at least 1")
	}
	if len(cfg.Network.AllowPrivate) > 0 {
		return errors.New("pod mode: --network-allow-private has no effect (network mode off only)")
	}
	if cfg.Pod.Namespace == "" {
		if cfg.Pod.Namespace = kube.InClusterNamespace(); cfg.Pod.Namespace == "" {
			cfg.Pod.Namespace = "paddock"
		}
	}
	b, err := newPodBackend(cfg, log)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o711); err != nil {
		return err
	}
	log.Info("pod mode", "namespace", cfg.Pod.Namespace, "agent_image", cfg.Pod.AgentImage)
	return runDaemon(cfg, daemonMode{backend: b, noNetworkReason: podNoNetwork}, log)
}
