package pod

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestObjects checks the shapes the backend writes: the token lives only
// in the Secret (mounted read-only, read with --token-file), and the
// NetworkPolicy denies all egress and admits only the clients to the
// agent port.
func TestObjects(t *testing.T) {
	b, err := New(Config{Kube: &kube.Client{}, Namespace: "ns", AgentImage: "agent:1",
		Templates: map[string]Template{"base": {Image: "img:1"}}, ClientCIDRs: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	p := b.podFor(sandbox.Spec{ID: "sbx1", Template: "base", Env: map[string]string{"A": "1"}}, b.cfg.Templates["base"])
	raw, _ := json.Marshal(p)
	if strings.Contains(strings.ToLower(string(raw)), "paddock_agent_token") {
		t.Errorf("the Pod carries the token in its env: %s", raw)
	}
	sc := p.Spec.Containers[0]
	if !strings.Contains(strings.Join(sc.Command, " "), "--token-file "+tokenMount+"/"+tokenKey) {
		t.Errorf("agent command %v does not read the token file", sc.Command)
	}
	var mounted bool
	for _, m := range sc.VolumeMounts {
		mounted = mounted || (m.Name == "token" && m.MountPath == tokenMount && m.ReadOnly)
	}
	var vol bool
	for _, v := range p.Spec.Volumes {
		vol = vol || (v.Name == "token" && v.Secret != nil && v.Secret.SecretName == "paddock-sbx1" && v.Secret.DefaultMode == 0o444)
	}
	if !mounted || !vol {
		t.Errorf("token Secret not mounted read-only: mounts %+v volumes %+v", sc.VolumeMounts, p.Spec.Volumes)
	}

	np := b.policyFor("sbx1", ownerReference{APIVersion: "v1", Kind: "Pod", Name: "paddock-sbx1", UID: "u1"})
	tests := []struct {
		name string
		ok   bool
	}{
		{"selects the sandbox", np.Spec.PodSelector.MatchLabels[labelSandbox] == "sbx1"},
		{"both policy types", len(np.Spec.PolicyTypes) == 2},
		{"no egress rule", np.Spec.Egress != nil && len(np.Spec.Egress) == 0},
		{"one ingress rule to the agent port", len(np.Spec.Ingress) == 1 && len(np.Spec.Ingress[0].Ports) == 1 &&
			np.Spec.Ingress[0].Ports[0].Port == DefaultAgentPort},
		{"from paddockd, the gateway and the CIDR", len(np.Spec.Ingress) == 1 && len(np.Spec.Ingress[0].From) == 3 &&
			np.Spec.Ingress[0].From[2].IPBlock.CIDR == "10.0.0.0/8"},
		{"owned by the Pod", len(np.Metadata.OwnerReferences) == 1 && np.Metadata.OwnerReferences[0].UID == "u1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Errorf("policy %+v", np)
			}
		})
	}
	// written explicitly: with policyTypes Egress an empty list denies all egress
	raw, _ = json.Marshal(np)
	if !strings.Contains(string(raw), `"egress":[]`) {
		t.Errorf("policy JSON lacks an empty egress list: %s", raw)
	}
}

// TestNoClientsRefused: an ingress rule with an empty "from" would admit
// every source, so a Config naming no client is refused.
func TestNoClientsRefused(t *testing.T) {
	_, err := New(Config{Kube: &kube.Client{}, Namespace: "ns", AgentImage: "a",
		Templates: map[string]Template{"base": {Image: "i"}}, ClientSelectors: []map[string]string{}})
	if err == nil {
		t.Fatal("New accepted a Config without agent clients")
	}
}

// TestActiveDeadline: with MaxLifetime the Pod carries activeDeadlineSeconds
// = MaxLifetime + DeadlineGrace (whole seconds, rounded up), so the kubelet
// ends it even while paddockd is down; without, no deadline.
func TestActiveDeadline(t *testing.T) {
	tests := []struct {
		name     string
		lifetime time.Duration
		want     string // the JSON field, "" = absent
	}{
		{"none", 0, ""},
		{"one day", 24 * time.Hour, `"activeDeadlineSeconds":86460`},
		{"rounded up", 1500 * time.Millisecond, `"activeDeadlineSeconds":62`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(Config{Kube: &kube.Client{}, Namespace: "ns", AgentImage: "agent:1",
				Templates: map[string]Template{"base": {Image: "img:1"}}, MaxLifetime: tt.lifetime})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(b.podFor(sandbox.Spec{ID: "sbx1", Template: "base"}, b.cfg.Templates["base"]))
			got := strings.Contains(string(raw), "activeDeadlineSeconds")
			if tt.want == "" && got || tt.want != "" && !strings.Contains(string(raw), tt.want) {
				t.Errorf("pod %s, want %q", raw, tt.want)
			}
		})
	}
}
