package cluster

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// nodeInfo is a node as the gateway sees it, from its Lease.
type nodeInfo struct {
	name   string
	url    *url.URL
	e2bURL *url.URL // its E2B endpoint; nil: none
	// e2bTemplates maps its E2B endpoint's template ids and aliases to
	// its templates.
	e2bTemplates map[string]string
	capacity     int
	live         int
	templates    []string
	idle         map[string]int // idle warm-pool sandboxes per template
	open         bool           // creates from templates it does not list (its API catalog)
	lost         bool
	renewedAt    time.Time
}

// annPairs yields the key=value pairs of a Lease annotation written as
// "k=v,k=v,..." (idle counts, E2B aliases); an item without "=" is skipped.
func annPairs(a string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for kv := range strings.SplitSeq(a, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok && !yield(k, v) {
				return
			}
		}
	}
}

// nodeCache is the gateway's view of the node Leases, re-read when older
// than refresh. pending holds the times of creates this gateway placed that
// the node's Lease does not count yet (placed after its last renewal), so a
// burst of creates spreads before the nodes report them.
type nodeCache struct {
	kc      *kube.Client
	ns      string
	refresh time.Duration

	mu      sync.Mutex
	nodes   map[string]*nodeInfo
	at      time.Time
	pending map[string][]pendingCreate
}

func (c *nodeCache) get(ctx context.Context) (map[string]*nodeInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes != nil && time.Since(c.at) < c.refresh {
		return c.nodes, nil
	}
	var l LeaseList
	if err := c.kc.Get(ctx, leasesPath(c.ns)+selector(labelKind, kindNode), &l); err != nil {
		if c.nodes != nil {
			return c.nodes, nil // serve the last view while the API server is away
		}
		return nil, err
	}
	now := time.Now()
	nodes := make(map[string]*nodeInfo, len(l.Items))
	for i := range l.Items {
		ls := &l.Items[i]
		u, err := url.Parse(ls.Metadata.Annotations[annURL])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		capacity, _ := strconv.Atoi(ls.Metadata.Annotations[annCapacity])
		live, _ := strconv.Atoi(ls.Metadata.Annotations[annLive])
		var tmpl []string
		if t := ls.Metadata.Annotations[annTemplates]; t != "" {
			tmpl = strings.Split(t, ",")
		}
		idle := map[string]int{}
		for k, v := range annPairs(ls.Metadata.Annotations[annIdle]) {
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				idle[k] = c
			}
		}
		var e2b *url.URL
		if eu, err := url.Parse(ls.Metadata.Annotations[annE2BURL]); err == nil && (eu.Scheme == "http" || eu.Scheme == "https") && eu.Host != "" {
			e2b = eu
		}
		aliases := map[string]string{}
		for k, v := range annPairs(ls.Metadata.Annotations[annE2BTpls]) {
			if k != "" && v != "" {
				aliases[k] = v
			}
		}
		name := ls.Spec.HolderIdentity
		nodes[name] = &nodeInfo{name: name, url: u, e2bURL: e2b, e2bTemplates: aliases, capacity: capacity, live: live,
			templates: tmpl, idle: idle, open: ls.Metadata.Annotations[annOpen] == "true", lost: ls.Expired(now), renewedAt: ls.RenewedAt()}
	}
	if c.pending == nil {
		c.pending = map[string][]pendingCreate{}
	}
	for name, ps := range c.pending {
		n := nodes[name]
		var keep []pendingCreate
		for _, t := range ps {
			if n != nil && t.at.After(n.renewedAt) {
				keep = append(keep, t)
			}
		}
		c.pending[name] = keep
	}
	c.nodes, c.at = nodes, now
	return nodes, nil
}

// node returns the named node (nil if it has no Lease).
func (c *nodeCache) node(ctx context.Context, name string) (*nodeInfo, error) {
	nodes, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return nodes[name], nil
}

// errUnknownTemplate: no live node lists the template and none creates
// from templates it does not list.
type errUnknownTemplate struct{ template string }

func (e *errUnknownTemplate) Error() string {
	return fmt.Sprintf("template %q: no live node has it (the nodes' templates are listed in their Leases, annotation %s)", e.template, annTemplates)
}

// e2bTemplate is the template an E2B create of template id makes on n:
// what its E2B endpoint maps the id or alias to, else the name itself.
func (n *nodeInfo) e2bTemplate(id string) string {
	if t, ok := n.e2bTemplates[id]; ok {
		return t
	}
	return id
}

// placement is a create to place: its template, and whether it is an E2B
// create (only nodes with an E2B endpoint, the template resolved through
// each node's E2B aliases).
type placement struct {
	template string
	e2b      bool
}

// on is the template the create makes on n.
func (p placement) on(n *nodeInfo) string {
	if p.e2b {
		return n.e2bTemplate(p.template)
	}
	return p.template
}

// place orders the live nodes with room for create p of template (""
// = the node's default, "base"; for an E2B create, among the nodes with
// an E2B endpoint and the template each one's aliases make of it): the
// nodes that list it, else the open
// ones (they resolve the caller's catalog templates and answer); among
// them those with an idle warm-pool sandbox of it (more than this
// gateway's creates the Lease does not show yet) first, then from least to
// most loaded (live + pending over capacity), ties in random order. A
// template no live node lists while none is open is *errUnknownTemplate.
func (c *nodeCache) place(ctx context.Context, p placement) ([]*nodeInfo, error) {
	nodes, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var listed, open []*nodeInfo
	known := p.template == ""
	for _, n := range nodes {
		if n.lost || (p.e2b && n.e2bURL == nil) {
			continue
		}
		t := p.on(n)
		has := t == "" || len(n.templates) == 0 || slices.Contains(n.templates, t)
		known = known || has || n.open
		if n.live+len(c.pending[n.name]) >= n.capacity {
			continue
		}
		if has {
			listed = append(listed, n)
		} else if n.open {
			open = append(open, n)
		}
	}
	if !known {
		return nil, &errUnknownTemplate{template: p.template}
	}
	out := listed
	if len(out) == 0 {
		out = open
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	warm := func(n *nodeInfo) bool {
		want := cmp.Or(p.on(n), "base")
		taken := 0 // creates of this template the Lease's idle count may still hold
		for _, pc := range c.pending[n.name] {
			if cmp.Or(pc.template, "base") == want {
				taken++
			}
		}
		return n.idle[want] > taken
	}
	load := func(n *nodeInfo) float64 { return float64(n.live+len(c.pending[n.name])) / float64(max(n.capacity, 1)) }
	less := func(a, b *nodeInfo) bool {
		if wa, wb := warm(a), warm(b); wa != wb {
			return wa
		}
		return load(a) < load(b)
	}
	// a stable insertion sort: few nodes, and it keeps the shuffled ties
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && less(out[j], out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// pendingCreate is a create this gateway placed that the node's Lease
// does not show yet.
type pendingCreate struct {
	at       time.Time
	template string
}

// placed records a create of template on node until the next Lease read.
func (c *nodeCache) placed(node, template string) {
	c.mu.Lock()
	c.pending[node] = append(c.pending[node], pendingCreate{at: time.Now(), template: template})
	c.mu.Unlock()
}

// live returns the nodes whose Lease is current.
func (c *nodeCache) live(ctx context.Context) ([]*nodeInfo, error) {
	nodes, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	var out []*nodeInfo
	for _, n := range nodes {
		if !n.lost {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no live paddock node (no current Lease in namespace %s)", c.ns)
	}
	return out, nil
}
