// Package pod is the pod-per-sandbox backend (cluster mode's second
// option, for clusters where a privileged paddockd DaemonSet is not
// allowed): each sandbox is a Kubernetes Pod running its template's image
// with paddock-agent as PID 1 of the sandbox container. An init container
// copies the agent from the agent image into an emptyDir; the agent
// listens on the pod network behind a per-sandbox token (agent.TokenListener)
// kept in a Secret the Pod owns, and the backend dials it at the pod IP.
// Isolation is the cluster's: a RuntimeClass per template (gVisor, Kata)
// and a default-deny NetworkPolicy per sandbox (objects.go).
package pod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

var (
	_ sandbox.Backend = (*Backend)(nil)
	_ sandbox.Meter   = (*Backend)(nil)
)

// Defaults of Config.
const (
	DefaultAgentPort = 7070
	// labelSandbox names the sandbox id on its Pod; List selects on it.
	labelSandbox = "paddock.dev/sandbox"
	agentDir     = "/.paddock"
)

// pollEvery is how often Create and Destroy look at a Pod's progress.
const pollEvery = 200 * time.Millisecond

var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,50}[a-z0-9])?$`)

// Template is the image (and optional RuntimeClass) of a template name.
type Template struct {
	Image        string
	RuntimeClass string
}

// Config configures a Backend.
type Config struct {
	Kube      *kube.Client
	Namespace string
	// AgentImage holds the static paddock-agent at /paddock-agent (the
	// init container runs "/paddock-agent install").
	AgentImage string
	// Templates maps template names to images; it must have "base".
	Templates map[string]Template
	// ImagePullPolicy of both containers ("" = the cluster's default;
	// "Never" for locally imported images).
	ImagePullPolicy string
	AgentPort       int // default DefaultAgentPort
	// ClientSelectors and ClientCIDRs are who may reach the agent port
	// under each sandbox's NetworkPolicy: pods with these labels (in the
	// namespace; default paddockd's and the gateway's) and these address
	// ranges (a paddockd outside the cluster).
	ClientSelectors []map[string]string
	ClientCIDRs     []string
	// MaxLifetime bounds every sandbox Pod's life: its
	// activeDeadlineSeconds is MaxLifetime + DeadlineGrace, so the kubelet
	// ends it even while paddockd is down (0: no deadline). Pass the
	// longest lease (manager.Config.MaxTimeout).
	MaxLifetime time.Duration
	Log         *slog.Logger
}

// DeadlineGrace is added to MaxLifetime in a Pod's activeDeadlineSeconds:
// paddockd's reaper ends a sandbox at its lease, the kubelet only when
// paddockd did not.
const DeadlineGrace = 60 * time.Second

// DefaultClientSelectors are the labels of deploy/kubernetes' paddockd and
// gateway pods.
var DefaultClientSelectors = []map[string]string{
	{"app.kubernetes.io/name": "paddockd"}, {"app.kubernetes.io/name": "paddock-gateway"},
}

// Backend runs sandboxes as Pods. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	tokens sync.Map // sandbox id → agent token, read from its Secret once
	agent  *agent.Client
}

// New checks cfg.
func New(cfg Config) (*Backend, error) {
	if cfg.Kube == nil || cfg.Namespace == "" || cfg.AgentImage == "" {
		return nil, errors.New("pod backend: Kube, Namespace and AgentImage are required")
	}
	if _, ok := cfg.Templates["base"]; !ok {
		return nil, errors.New("pod backend: no image for the base template")
	}
	if cfg.AgentPort == 0 {
		cfg.AgentPort = DefaultAgentPort
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ClientSelectors == nil {
		cfg.ClientSelectors = DefaultClientSelectors
	}
	if len(cfg.ClientSelectors)+len(cfg.ClientCIDRs) == 0 {
		// an ingress rule with an empty "from" admits every source
		return nil, errors.New("pod backend: no agent clients (ClientSelectors or ClientCIDRs) for the NetworkPolicy")
	}
	b := &Backend{cfg: cfg, log: cfg.Log}
	b.agent = agent.NewClient(b.Dial)
	return b, nil
}

func podName(id string) string { return "paddock-" + id }

func (b *Backend) podPath(id string) string {
	return "/api/v1/namespaces/" + b.cfg.Namespace + "/pods/" + podName(id)
}

// Templates lists the configured template names.
func (b *Backend) Templates() []string {
	var out []string
	for name := range b.cfg.Templates {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Create creates the token Secret, the Pod mounting it, makes the Pod the
// Secret's owner, creates the NetworkPolicy, and waits until the agent
// answers; on any failure (a cancelled ctx too) it deletes all of them.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Info, error) {
	if !idPattern.MatchString(spec.ID) {
		return sandbox.Info{}, fmt.Errorf("sandbox id %q: %w", spec.ID, sandbox.ErrInvalid)
	}
	tpl, ok := b.cfg.Templates[spec.Template]
	if !ok {
		return sandbox.Info{}, fmt.Errorf("template %q: %w", spec.Template, sandbox.ErrUnknownTemplate)
	}
	if spec.Network != nil {
		return sandbox.Info{}, fmt.Errorf("pod backend: per-sandbox networks (use a NetworkPolicy): %w", sandbox.ErrNotSupported)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Info{}, err
	}
	tok := make([]byte, agent.TokenLen/2)
	rand.Read(tok)
	token := hex.EncodeToString(tok)
	if err := b.createSecret(ctx, spec.ID, token); err != nil {
		if kube.IsConflict(err) {
			return sandbox.Info{}, fmt.Errorf("sandbox %s exists: %w", spec.ID, sandbox.ErrConflict)
		}
		b.deleteObjectsQuietly(ctx, spec.ID) // the request may have reached the API server
		return sandbox.Info{}, fmt.Errorf("create token secret: %w", err)
	}
	var created pod
	err := b.cfg.Kube.Create(ctx, "/api/v1/namespaces/"+b.cfg.Namespace+"/pods", b.podFor(spec, tpl), &created)
	if kube.IsConflict(err) { // a Pod without its Secret: not ours to delete
		b.deleteObjectsQuietly(ctx, spec.ID)
		return sandbox.Info{}, fmt.Errorf("sandbox %s exists: %w", spec.ID, sandbox.ErrConflict)
	}
	if err != nil {
		err = fmt.Errorf("create pod: %w", err)
	} else if err = b.adopt(ctx, spec.ID, created); err == nil {
		b.tokens.Store(spec.ID, token)
		err = b.waitAgent(ctx, spec.ID)
	}
	if err != nil {
		rb, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := b.Destroy(rb, spec.ID); derr != nil {
			b.log.Warn("pod backend: rollback", "sandbox", spec.ID, "err", derr)
		}
		return sandbox.Info{}, err
	}
	runtime := "pod"
	if tpl.RuntimeClass != "" {
		runtime += "/" + tpl.RuntimeClass
	}
	return sandbox.Info{ID: spec.ID, Runtime: runtime}, nil
}

// waitAgent polls the Pod until its agent answers GET /health.
func (b *Backend) waitAgent(ctx context.Context, id string) error {
	for {
		var p pod
		if err := b.cfg.Kube.Get(ctx, b.podPath(id), &p); err != nil {
			return fmt.Errorf("pod %s: %w", id, err)
		}
		if why := failed(p); why != "" {
			return fmt.Errorf("pod %s: %s: %w", id, why, sandbox.ErrUnavailable)
		}
		if running(p) && b.health(ctx, p) == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s not ready: %w", id, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// health asks the agent of p for GET /health over one connection.
func (b *Backend) health(ctx context.Context, p pod) error {
	hc := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return b.dialPod(ctx, p) },
		DisableKeepAlives: true,
	}, Timeout: 5 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/health", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agent health: %s", resp.Status)
	}
	return nil
}

// deleteObjectsQuietly is deleteObjects for a rollback: it logs.
func (b *Backend) deleteObjectsQuietly(ctx context.Context, id string) {
	rb, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := b.deleteObjects(rb, id); err != nil {
		b.log.Warn("pod backend: rollback", "sandbox", id, "err", err)
	}
}

// Destroy deletes the Pod, its Secret and NetworkPolicy, and waits until
// the Pod is gone (the kubelet has killed its containers); an unknown id
// is not an error.
func (b *Backend) Destroy(ctx context.Context, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("sandbox id %q: %w", id, sandbox.ErrInvalid)
	}
	if err := b.deleteObjects(ctx, id); err != nil {
		return err
	}
	// PID 1 ignores SIGTERM: a grace of 1 s, then the kubelet's SIGKILL
	if err := b.cfg.Kube.Delete(ctx, b.podPath(id)+"?gracePeriodSeconds=1"); err != nil {
		return fmt.Errorf("delete pod %s: %w", id, err)
	}
	for {
		err := b.cfg.Kube.Get(ctx, b.podPath(id), nil)
		if kube.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pod %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pod %s still terminating: %w", id, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// Alive reports whether the sandbox container runs.
func (b *Backend) Alive(ctx context.Context, id string) (bool, error) {
	var p pod
	err := b.cfg.Kube.Get(ctx, b.podPath(id), &p)
	if kube.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pod %s: %w", id, err)
	}
	return running(p), nil
}

// Dial connects to the agent of sandbox id at its pod IP with its token.
func (b *Backend) Dial(ctx context.Context, id string) (net.Conn, error) {
	var p pod
	err := b.cfg.Kube.Get(ctx, b.podPath(id), &p)
	if kube.IsNotFound(err) {
		return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", id, err)
	}
	if !running(p) {
		return nil, fmt.Errorf("sandbox %s not running: %w", id, sandbox.ErrUnavailable)
	}
	return b.dialPod(ctx, p)
}

func (b *Backend) dialPod(ctx context.Context, p pod) (net.Conn, error) {
	token, err := b.token(ctx, p.Metadata.Labels[labelSandbox])
	if err != nil {
		return nil, fmt.Errorf("agent of %s: %w: %w", p.Metadata.Name, sandbox.ErrUnavailable, err)
	}
	c, err := agent.DialToken(ctx, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(b.cfg.AgentPort)), token)
	if err != nil {
		return nil, fmt.Errorf("agent of %s: %w: %w", p.Metadata.Name, sandbox.ErrUnavailable, err)
	}
	return c, nil
}

// Stats asks the sandbox's agent for its cgroup's use (GET /stats: the
// agent reads its own cgroup from inside the Pod). Disk use is not
// reported (0).
func (b *Backend) Stats(ctx context.Context, id string) (sandbox.Stats, error) {
	st, err := b.agent.Stats(ctx, id)
	if err != nil {
		return sandbox.Stats{}, err
	}
	return sandbox.Stats{CPUSeconds: st.CPUSeconds, MemoryBytes: st.MemoryBytes, MemoryPeakBytes: st.MemoryPeakBytes,
		PIDs: st.PIDs, NetRxBytes: st.NetRxBytes, NetTxBytes: st.NetTxBytes}, nil
}

// List returns the ids of every sandbox Pod or token Secret in the
// namespace (a Secret without its Pod is the trace of a create cut short
// by a crash: recovery destroys it).
func (b *Backend) List(ctx context.Context) ([]string, error) {
	q := url.Values{"labelSelector": {labelSandbox}}
	var ids []string
	for _, kind := range []string{"pods", "secrets"} {
		var l struct {
			Items []struct {
				Metadata objectMeta `json:"metadata"`
			} `json:"items"`
		}
		if err := b.cfg.Kube.Get(ctx, "/api/v1/namespaces/"+b.cfg.Namespace+"/"+kind+"?"+q.Encode(), &l); err != nil {
			return nil, fmt.Errorf("list %s: %w", kind, err)
		}
		for _, it := range l.Items {
			if id := it.Metadata.Labels[labelSandbox]; idPattern.MatchString(id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// running: the Pod is not being deleted, has an IP and its sandbox
// container runs.
func running(p pod) bool {
	if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "sandbox" {
			return c.State.Running != nil
		}
	}
	return false
}

// failed says why p can never run ("" while it still may).
func failed(p pod) string {
	switch p.Status.Phase {
	case "Failed", "Succeeded":
		return "pod " + p.Status.Phase + " " + p.Status.Reason + " " + p.Status.Message
	}
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerError", "CreateContainerConfigError", "RunContainerError":
				return c.Name + ": " + w.Reason + ": " + w.Message
			}
		}
		if t := c.State.Terminated; t != nil && c.Name == "sandbox" {
			return fmt.Sprintf("sandbox container exited %d (%s)", t.ExitCode, t.Reason)
		}
	}
	return ""
}
