// Package cluster is Paddock's cluster mode on Kubernetes: every node runs
// paddockd, which registers itself with a coordination.k8s.io Lease and
// mirrors its sandboxes into the Sandbox custom resource (Node); a
// stateless gateway serves the same REST API, placing creates on a node with
// capacity and proxying every other call to the sandbox's owning node
// (Gateway). API keys are Kubernetes Secrets holding only the key's SHA-256.
// Nothing shared lives outside the Kubernetes API. See docs/kubernetes.md.
package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"time"
)

// Group and Version of the Sandbox custom resource.
const (
	Group   = "paddock.dev"
	Version = "v1alpha1"

	labelKind  = Group + "/kind"
	labelNode  = Group + "/node"
	labelOwner = Group + "/owner"

	annURL       = Group + "/url"
	annE2BURL    = Group + "/e2b-url"
	annE2BTpls   = Group + "/e2b-templates"
	annCapacity  = Group + "/capacity"
	annLive      = Group + "/live"
	annTemplates = Group + "/templates"
	annIdle      = Group + "/idle"
	annOpen      = Group + "/templates-open"

	// maxLeaseTemplates bounds the names in a Lease's templates and idle
	// annotations (each name at most 63 bytes, so about 6 KiB); a node with
	// more lists the first ones, sorted, and is marked templates-open.
	maxLeaseTemplates = 100

	kindNode   = "node"
	kindAPIKey = "api-key"

	// microTime is the wire format of metav1.MicroTime.
	microTime = "2006-01-02T15:04:05.000000Z07:00"
)

// ObjectMeta is the part of metav1.ObjectMeta Paddock uses.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
}

// Lease is a coordination.k8s.io/v1 Lease: one per node, renewed by its
// paddockd; its annotations carry the node's URL and capacity.
type Lease struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       LeaseSpec  `json:"spec"`
}

// LeaseSpec is coordination.k8s.io/v1 LeaseSpec.
type LeaseSpec struct {
	HolderIdentity       string `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds int32  `json:"leaseDurationSeconds,omitempty"`
	AcquireTime          string `json:"acquireTime,omitempty"`
	RenewTime            string `json:"renewTime,omitempty"`
}

// Expired reports whether the lease was not renewed within its duration
// before now (a lease never renewed is expired).
func (l *Lease) Expired(now time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, l.Spec.RenewTime)
	if err != nil {
		return true
	}
	return now.After(t.Add(time.Duration(l.Spec.LeaseDurationSeconds) * time.Second))
}

// RenewedAt is the lease's last renewal (zero if never).
func (l *Lease) RenewedAt() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, l.Spec.RenewTime)
	return t
}

// LeaseList is a list of Leases.
type LeaseList struct {
	Items []Lease `json:"items"`
}

// Sandbox is the paddock.dev/v1alpha1 Sandbox custom resource: one per
// sandbox, named by its id. The spec is written once at create (by the
// gateway, or by the node for sandboxes made on it directly); the status
// only by the owning node.
type Sandbox struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       SandboxSpec    `json:"spec"`
	Status     *SandboxStatus `json:"status,omitempty"`
}

// SandboxSpec is where a sandbox lives and whose it is.
type SandboxSpec struct {
	Node      string `json:"node"`
	OwnerHash string `json:"ownerHash"`
	Template  string `json:"template,omitempty"`
}

// SandboxStatus is the owning node's view of the sandbox.
type SandboxStatus struct {
	State     string     `json:"state,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	CreatedAt *time.Time `json:"createdAt,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// SandboxList is a list of Sandboxes.
type SandboxList struct {
	Items []Sandbox `json:"items"`
}

// Secret is a core/v1 Secret; Data values are base64 on the wire, which
// encoding/json does for []byte.
type Secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   ObjectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
}

// SecretList is a list of Secrets.
type SecretList struct {
	Items []Secret `json:"items"`
}

// OwnerHash is the owner's (API key id's) hash as kept in the Sandbox
// resource and its label: 32 hex digits of SHA-256.
func OwnerHash(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:16])
}

// paths of the resources, in namespace ns.
func leasesPath(ns string) string {
	return "/apis/coordination.k8s.io/v1/namespaces/" + url.PathEscape(ns) + "/leases"
}

func sandboxesPath(ns string) string {
	return "/apis/" + Group + "/" + Version + "/namespaces/" + url.PathEscape(ns) + "/sandboxes"
}

func secretsPath(ns string) string {
	return "/api/v1/namespaces/" + url.PathEscape(ns) + "/secrets"
}

func selector(k, v string) string {
	return "?labelSelector=" + url.QueryEscape(k+"="+v)
}

// leaseName is the Lease of node name.
func leaseName(node string) string { return "paddock-node-" + node }
