package pod

import (
	"context"
	"fmt"
	"strconv"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// The per-sandbox objects next to the Pod: a Secret holding the agent's
// token (mounted read-only into the sandbox container, read by
// "paddock-agent serve --token-file") and a default-deny NetworkPolicy.
// Both carry an ownerReference to the Pod, so the API server's garbage
// collector deletes them with it even when paddockd does not (Destroy
// deletes all three itself).

const (
	tokenKey   = "token"
	tokenMount = "/.paddock-token"
)

type ownerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller bool   `json:"controller,omitempty"`
}

type secret struct {
	APIVersion string            `json:"apiVersion,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Metadata   objectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"` // base64 on the wire
}

type networkPolicy struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   objectMeta        `json:"metadata"`
	Spec       networkPolicySpec `json:"spec"`
}

type networkPolicySpec struct {
	PodSelector labelSelector       `json:"podSelector"`
	PolicyTypes []string            `json:"policyTypes"`
	Ingress     []policyIngressRule `json:"ingress"`
	Egress      []struct{}          `json:"egress"` // always empty: no egress at all
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

type policyIngressRule struct {
	From  []policyPeer `json:"from"`
	Ports []policyPort `json:"ports"`
}

type policyPeer struct {
	PodSelector       *labelSelector `json:"podSelector,omitempty"`
	NamespaceSelector *labelSelector `json:"namespaceSelector,omitempty"`
	IPBlock           *ipBlock       `json:"ipBlock,omitempty"`
}

type ipBlock struct {
	CIDR string `json:"cidr"`
}

type policyPort struct {
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
}

func (b *Backend) secretPath(id string) string {
	return "/api/v1/namespaces/" + b.cfg.Namespace + "/secrets/" + podName(id)
}

func (b *Backend) policyPath(id string) string {
	return "/apis/networking.k8s.io/v1/namespaces/" + b.cfg.Namespace + "/networkpolicies/" + podName(id)
}

func (b *Backend) labels(id string) map[string]string {
	return map[string]string{labelSandbox: id, "app.kubernetes.io/managed-by": "paddock"}
}

// createSecret creates sandbox id's token Secret (owned by nobody yet: the
// Pod that mounts it does not exist; adopt sets the owner).
func (b *Backend) createSecret(ctx context.Context, id, token string) error {
	s := secret{APIVersion: "v1", Kind: "Secret", Type: "paddock.dev/agent-token",
		Metadata:   objectMeta{Name: podName(id), Namespace: b.cfg.Namespace, Labels: b.labels(id)},
		StringData: map[string]string{tokenKey: token}}
	return b.cfg.Kube.Create(ctx, "/api/v1/namespaces/"+b.cfg.Namespace+"/secrets", s, nil)
}

// policyFor is sandbox id's NetworkPolicy: no egress at all; ingress only
// to the agent port and only from the configured clients (paddockd's and
// the gateways' pods, and ClientCIDRs).
func (b *Backend) policyFor(id string, owner ownerReference) networkPolicy {
	var from []policyPeer
	for _, sel := range b.cfg.ClientSelectors {
		from = append(from, policyPeer{PodSelector: &labelSelector{MatchLabels: sel}})
	}
	for _, c := range b.cfg.ClientCIDRs {
		from = append(from, policyPeer{IPBlock: &ipBlock{CIDR: c}})
	}
	md := objectMeta{Name: podName(id), Namespace: b.cfg.Namespace, Labels: b.labels(id), OwnerReferences: []ownerReference{owner}}
	return networkPolicy{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Metadata: md,
		Spec: networkPolicySpec{
			PodSelector: labelSelector{MatchLabels: map[string]string{labelSandbox: id}},
			PolicyTypes: []string{"Ingress", "Egress"},
			Ingress:     []policyIngressRule{{From: from, Ports: []policyPort{{Protocol: "TCP", Port: b.cfg.AgentPort}}}},
			Egress:      []struct{}{},
		}}
}

// adopt makes the Pod p the owner of sandbox id's Secret and creates its
// NetworkPolicy owned by p.
func (b *Backend) adopt(ctx context.Context, id string, p pod) error {
	owner := ownerReference{APIVersion: "v1", Kind: "Pod", Name: p.Metadata.Name, UID: p.Metadata.UID}
	patch := map[string]any{"metadata": map[string]any{"ownerReferences": []ownerReference{owner}}}
	if err := b.cfg.Kube.MergePatch(ctx, b.secretPath(id), patch, nil); err != nil {
		return fmt.Errorf("own secret %s: %w", podName(id), err)
	}
	path := "/apis/networking.k8s.io/v1/namespaces/" + b.cfg.Namespace + "/networkpolicies"
	if err := b.cfg.Kube.Create(ctx, path, b.policyFor(id, owner), nil); err != nil {
		return fmt.Errorf("network policy %s: %w", podName(id), err)
	}
	return nil
}

// token returns sandbox id's agent token: cached, else from its Secret.
func (b *Backend) token(ctx context.Context, id string) (string, error) {
	if t, ok := b.tokens.Load(id); ok {
		return t.(string), nil
	}
	var s secret
	if err := b.cfg.Kube.Get(ctx, b.secretPath(id), &s); err != nil {
		return "", fmt.Errorf("token secret of %s: %w", id, err)
	}
	t := string(s.Data[tokenKey])
	b.tokens.Store(id, t)
	return t, nil
}

// deleteObjects deletes sandbox id's Secret and NetworkPolicy (missing
// ones are fine).
func (b *Backend) deleteObjects(ctx context.Context, id string) error {
	b.tokens.Delete(id)
	if err := b.cfg.Kube.Delete(ctx, b.secretPath(id)); err != nil {
		return fmt.Errorf("delete secret %s: %w", podName(id), err)
	}
	if err := b.cfg.Kube.Delete(ctx, b.policyPath(id)); err != nil && !kube.IsNotFound(err) {
		return fmt.Errorf("delete network policy %s: %w", podName(id), err)
	}
	return nil
}

// agentArgs is the sandbox container's command.
func (b *Backend) agentArgs() []string {
	return []string{agentDir + "/paddock-agent", "serve", "--listen-tcp", ":" + strconv.Itoa(b.cfg.AgentPort),
		"--token-file", tokenMount + "/" + tokenKey}
}
