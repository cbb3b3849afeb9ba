package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// DefaultLeaseDuration is a node Lease's duration: a node that has not
// renewed it for this long is lost, and its sandboxes are reported lost.
const DefaultLeaseDuration = 15 * time.Second

// NodeConfig configures a node's registration and mirror.
type NodeConfig struct {
	Kube      *kube.Client
	Namespace string
	// Name is the node's name (its Lease is paddock-node-<Name>); URL the
	// address gateways reach its REST API at.
	Name, URL string
	// E2BURL is where gateways reach its E2B endpoint ("" = none).
	E2BURL string
	// E2BTemplates maps the E2B endpoint's template ids and aliases to the
	// node's templates (e2b.Aliases), so gateways place an E2B create on a
	// node that has the template it makes.
	E2BTemplates map[string]string
	// Capacity is the most live sandboxes the node takes (--max-sandboxes).
	Capacity int
	// LeaseDuration is the Lease's duration (DefaultLeaseDuration if 0); it
	// is renewed every third of it.
	LeaseDuration time.Duration
	// Records lists the node's sandbox records (store.Store.All).
	Records func() ([]*store.Record, error)
	// Templates lists the node's template names.
	Templates func() []string
	// OpenTemplates: the node also creates from templates its list does
	// not name (its /v1/templates catalog: templates built or imported
	// through the API, per key), so gateways send it creates of templates
	// no node lists and let it answer.
	OpenTemplates bool
	// KeysDir is the daemon's keys directory, kept equal to the API-key
	// Secrets.
	KeysDir string
	Log     *slog.Logger
}

// Node registers a paddockd in the cluster and mirrors its sandboxes.
type Node struct {
	cfg   NodeConfig
	poke  chan struct{}
	acqAt string
}

// NewNode returns a Node; Run starts it.
func NewNode(cfg NodeConfig) (*Node, error) {
	if cfg.Kube == nil || cfg.Name == "" || cfg.URL == "" || cfg.Namespace == "" {
		return nil, errors.New("cluster node: kube client, namespace, name and URL are required")
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.LeaseDuration < 3*time.Second {
		return nil, errors.New("cluster node: lease duration must be at least 3s")
	}
	return &Node{cfg: cfg, poke: make(chan struct{}, 1)}, nil
}

// Poke asks for a mirror pass soon; it never blocks (pass it as, or call it
// from, manager.Config.Events).
func (n *Node) Poke() {
	select {
	case n.poke <- struct{}{}:
	default:
	}
}

// Sync renews the Lease, syncs the keys and mirrors the sandboxes once; the
// daemon calls it before serving so the node is routable at once.
func (n *Node) Sync(ctx context.Context) error {
	return errors.Join(n.renew(ctx), n.syncKeys(ctx), n.mirror(ctx))
}

// Run renews the Lease every third of its duration and mirrors the
// sandboxes on every Poke (and every two seconds) until ctx ends.
func (n *Node) Run(ctx context.Context) {
	renew := time.NewTicker(n.cfg.LeaseDuration / 3)
	defer renew.Stop()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			if err := n.renew(ctx); err != nil && ctx.Err() == nil {
				n.cfg.Log.Warn("cluster: lease renewal failed", "err", err)
			}
		case <-tick.C:
			if err := errors.Join(n.syncKeys(ctx), n.mirror(ctx)); err != nil && ctx.Err() == nil {
				n.cfg.Log.Warn("cluster: sync failed", "err", err)
			}
		case <-n.poke:
			if err := n.mirror(ctx); err != nil && ctx.Err() == nil {
				n.cfg.Log.Warn("cluster: mirror failed", "err", err)
			}
		}
	}
}

func (n *Node) syncKeys(ctx context.Context) error {
	if n.cfg.KeysDir == "" {
		return nil
	}
	return syncKeys(ctx, n.cfg.Kube, n.cfg.Namespace, n.cfg.KeysDir)
}

// renew writes the node's Lease (creating it the first time) with the
// node's URL, capacity, live count, templates and idle warm-pool sandboxes
// per template (annotations in docs/kubernetes.md). The live count is the
// keys' sandboxes: the warm pool's idle ones (no owner) give their slot up
// to a create when the node is full, so they do not take capacity.
func (n *Node) renew(ctx context.Context) error {
	live := 0
	idle := map[string]int{}
	if recs, err := n.cfg.Records(); err == nil {
		for _, r := range recs {
			switch {
			case r.State == sandbox.Terminated:
			case r.Owner != "":
				live++
			default:
				idle[r.Template]++
			}
		}
	}
	now := time.Now().UTC().Format(microTime)
	if n.acqAt == "" {
		n.acqAt = now
	}
	var tmpl []string
	if n.cfg.Templates != nil {
		tmpl = n.cfg.Templates()
	}
	ann := leaseTemplates(tmpl, idle, n.cfg.OpenTemplates)
	ann[annURL], ann[annCapacity], ann[annLive] = n.cfg.URL, strconv.Itoa(n.cfg.Capacity), strconv.Itoa(live)
	if n.cfg.E2BURL != "" {
		ann[annE2BURL] = n.cfg.E2BURL
		if a, cut := leaseAliases(n.cfg.E2BTemplates); a != "" {
			ann[annE2BTpls] = a
			if cut {
				ann[annOpen] = "true"
			}
		}
	}
	l := Lease{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Metadata: ObjectMeta{Name: leaseName(n.cfg.Name),
			Labels:      map[string]string{labelKind: kindNode, labelNode: n.cfg.Name},
			Annotations: ann},
		Spec: LeaseSpec{HolderIdentity: n.cfg.Name, LeaseDurationSeconds: int32(n.cfg.LeaseDuration / time.Second),
			AcquireTime: n.acqAt, RenewTime: now}}
	p := leasesPath(n.cfg.Namespace)
	var cur Lease
	err := n.cfg.Kube.Get(ctx, p+"/"+l.Metadata.Name, &cur)
	switch {
	case kube.IsNotFound(err):
		return n.cfg.Kube.Create(ctx, p, l, nil)
	case err != nil:
		return err
	}
	l.Metadata.ResourceVersion = cur.Metadata.ResourceVersion
	return n.cfg.Kube.Update(ctx, p+"/"+l.Metadata.Name, l, nil)
}

// leaseTemplates are the template annotations of a Lease: the sorted
// names (at most maxLeaseTemplates; a node with more is marked open), the
// idle warm-pool sandboxes as "name=count,..." (listed templates only) and
// templates-open when the node creates from templates it does not list.
func leaseTemplates(tmpl []string, idle map[string]int, open bool) map[string]string {
	tmpl = slices.Clone(tmpl)
	slices.Sort(tmpl)
	tmpl = slices.Compact(tmpl)
	if len(tmpl) > maxLeaseTemplates {
		tmpl, open = tmpl[:maxLeaseTemplates], true
	}
	var idles []string
	for _, t := range tmpl {
		if c := idle[t]; c > 0 {
			idles = append(idles, t+"="+strconv.Itoa(c))
		}
	}
	ann := map[string]string{annTemplates: strings.Join(tmpl, ","), annIdle: strings.Join(idles, ",")}
	if open {
		ann[annOpen] = "true"
	}
	return ann
}

// leaseAliases is the e2b-templates annotation of aliases: sorted
// "alias=template" pairs, at most maxLeaseTemplates (cut reports a longer
// map: the node is then marked templates-open); pairs that would not
// survive the format (a ',' or '=' in a name) are left out.
func leaseAliases(aliases map[string]string) (ann string, cut bool) {
	var pairs []string
	for k, v := range aliases {
		if k == "" || v == "" || strings.ContainsAny(k, ",=") || strings.ContainsAny(v, ",=") {
			continue
		}
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	if len(pairs) > maxLeaseTemplates {
		pairs, cut = pairs[:maxLeaseTemplates], true
	}
	return strings.Join(pairs, ","), cut
}

// mirror makes the Sandbox resources of this node match its records:
// missing ones are created, stale statuses rewritten, and resources of
// sandboxes the node no longer has deleted. Idle pool sandboxes (no owner)
// are not mirrored.
func (n *Node) mirror(ctx context.Context) error {
	// Resources first, records second: a resource the gateway wrote for a
	// create this node answered is then always matched by its record, never
	// deleted as stale.
	p := sandboxesPath(n.cfg.Namespace)
	var l SandboxList
	if err := n.cfg.Kube.Get(ctx, p+selector(labelNode, n.cfg.Name), &l); err != nil {
		return err
	}
	recs, err := n.cfg.Records()
	if err != nil {
		return err
	}
	have := make(map[string]*Sandbox, len(l.Items))
	for i := range l.Items {
		have[l.Items[i].Metadata.Name] = &l.Items[i]
	}
	var errs []error
	seen := map[string]bool{}
	for _, r := range recs {
		if r.Owner == "" {
			continue
		}
		seen[r.ID] = true
		want := statusOf(r)
		obj := have[r.ID]
		if obj == nil {
			obj = &Sandbox{}
			err := n.cfg.Kube.Create(ctx, p, n.object(r), obj)
			if kube.IsConflict(err) { // the gateway wrote it meanwhile
				err = n.cfg.Kube.Get(ctx, p+"/"+r.ID, obj)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if obj.Spec.Node != n.cfg.Name {
			continue // another node's record: never written here
		}
		if obj.Status != nil && sameStatus(*obj.Status, want) {
			continue
		}
		obj.Status = &want
		if err := n.cfg.Kube.Update(ctx, path.Join(p, r.ID, "status"), obj, nil); err != nil && !kube.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	for name := range have {
		if !seen[name] {
			if err := n.cfg.Kube.Delete(ctx, p+"/"+name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("mirror: %w", errors.Join(errs...))
	}
	return nil
}

// object is the Sandbox resource of r on this node (spec and labels).
func (n *Node) object(r *store.Record) Sandbox {
	return newSandbox(r.ID, n.cfg.Name, r.Owner, r.Template)
}

func newSandbox(id, node, owner, template string) Sandbox {
	oh := OwnerHash(owner)
	return Sandbox{APIVersion: Group + "/" + Version, Kind: "Sandbox",
		Metadata: ObjectMeta{Name: id, Labels: map[string]string{labelNode: node, labelOwner: oh}},
		Spec:     SandboxSpec{Node: node, OwnerHash: oh, Template: template}}
}

func statusOf(r *store.Record) SandboxStatus {
	c, e := r.CreatedAt.UTC().Truncate(time.Second), r.ExpiresAt.UTC().Truncate(time.Second)
	reason := r.Reason
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	return SandboxStatus{State: string(r.State), Reason: reason, CreatedAt: &c, ExpiresAt: &e}
}

func sameStatus(a, b SandboxStatus) bool {
	eq := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.State == b.State && a.Reason == b.Reason && eq(a.CreatedAt, b.CreatedAt) && eq(a.ExpiresAt, b.ExpiresAt)
}
