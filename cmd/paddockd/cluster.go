package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/e2b"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// ClusterConfig turns on cluster mode (docs/kubernetes.md): the daemon
// registers a node Lease, mirrors its sandboxes into the Sandbox resource
// and takes its API keys from the cluster's Secrets.
type ClusterConfig struct {
	// Enabled turns cluster mode on (the --kubeconfig or --cluster flag).
	Enabled bool `json:"enabled,omitempty"`
	// Kubeconfig is the kubeconfig file; empty: the pod's service account.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Namespace holds the Leases, Sandboxes and key Secrets (default
	// "paddock", or the pod's namespace).
	Namespace string `json:"namespace,omitempty"`
	// NodeName names this node (default: the host name).
	NodeName string `json:"node_name,omitempty"`
	// AdvertiseURL is where gateways reach this daemon (default:
	// http://<listen address>).
	AdvertiseURL string `json:"advertise_url,omitempty"`
	// E2BAdvertiseURL is where gateways reach this daemon's E2B endpoint
	// (default: http://<--e2b-listen>, or the --advertise-url host with
	// --e2b-listen's port when that listens on a wildcard).
	E2BAdvertiseURL string `json:"e2b_advertise_url,omitempty"`
	// LeaseSeconds is the node Lease's duration (default 15).
	LeaseSeconds int64 `json:"lease_seconds,omitempty"`
}

// clusterFlags registers the cluster-mode flags and returns a function
// that applies the ones given over the config file's values.
func clusterFlags(fs *flag.FlagSet) func(cfg *ClusterConfig, set map[string]bool) {
	on := fs.Bool("cluster", false, "cluster mode with the pod's service account (see --kubeconfig and docs/kubernetes.md)")
	kc := fs.String("kubeconfig", "", "cluster mode: kubeconfig of the Kubernetes API holding node Leases, Sandbox resources and API-key Secrets")
	ns := fs.String("cluster-namespace", "", `cluster mode: namespace of the Leases, Sandboxes and key Secrets (default "paddock" or the pod's)`)
	node := fs.String("node-name", "", "cluster mode: this node's name (default: the host name)")
	adv := fs.String("advertise-url", "", "cluster mode: URL gateways reach this daemon's API at (default http://<--listen>)")
	e2bAdv := fs.String("e2b-advertise-url", "", "cluster mode: URL gateways reach this daemon's E2B endpoint at (default http://<--e2b-listen>, or the --advertise-url host with its port)")
	lease := fs.Int64("lease-seconds", int64(cluster.DefaultLeaseDuration/time.Second), "cluster mode: node Lease duration; a node silent this long has its sandboxes reported lost")
	return func(cfg *ClusterConfig, set map[string]bool) {
		if set["kubeconfig"] {
			cfg.Kubeconfig, cfg.Enabled = *kc, true
		}
		if set["cluster"] {
			cfg.Enabled = *on
		}
		if set["cluster-namespace"] {
			cfg.Namespace = *ns
		}
		if set["node-name"] {
			cfg.NodeName = *node
		}
		if set["e2b-advertise-url"] {
			cfg.E2BAdvertiseURL = *e2bAdv
		}
		if set["advertise-url"] {
			cfg.AdvertiseURL = *adv
		}
		if set["lease-seconds"] || cfg.LeaseSeconds == 0 {
			cfg.LeaseSeconds = *lease
		}
	}
}

// clusterNode is the daemon's cluster membership, or nil outside cluster
// mode: Poke goes into manager.Config.Events, Start runs after Recover.
type clusterNode struct{ node *cluster.Node }

// newClusterNode builds the node from cfg; records and templates are read
// through the closures once the daemon is wired. openTemplates: the node
// has a /v1/templates catalog (templates beyond its list, per key).
func newClusterNode(cfg Config, st *store.Store, templates func() []string, openTemplates bool, log *slog.Logger) (*clusterNode, error) {
	c := cfg.Cluster
	if !c.Enabled {
		return nil, nil
	}
	kc, err := kube.Load(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if c.Namespace == "" {
		if c.Namespace = kube.InClusterNamespace(); c.Namespace == "" {
			c.Namespace = "paddock"
		}
	}
	if c.NodeName == "" {
		if c.NodeName, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	if c.AdvertiseURL == "" {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			return nil, fmt.Errorf("cluster mode: --listen %s has no host gateways can reach; pass --advertise-url", cfg.Listen)
		}
		c.AdvertiseURL = "http://" + net.JoinHostPort(host, port)
	}
	e2bURL, err := e2bAdvertiseURL(c, cfg.E2B.Listen)
	if err != nil {
		return nil, err
	}
	var aliases map[string]string
	if e2bURL != "" {
		aliases = e2b.Aliases(cfg.E2B.Templates)
	}
	n, err := cluster.NewNode(cluster.NodeConfig{Kube: kc, Namespace: c.Namespace, Name: c.NodeName, URL: c.AdvertiseURL,
		E2BURL: e2bURL, E2BTemplates: aliases,
		Capacity: cfg.MaxSandboxes, LeaseDuration: time.Duration(c.LeaseSeconds) * time.Second,
		Records: st.All, Templates: templates, OpenTemplates: openTemplates, KeysDir: filepath.Join(cfg.StateDir, "keys"), Log: log})
	if err != nil {
		return nil, err
	}
	return &clusterNode{node: n}, nil
}

// e2bAdvertiseURL is where gateways reach the E2B endpoint listening on
// listen ("" when it is off): the configured URL, else http://<listen>,
// else (a wildcard listen) the advertise URL's host with listen's port.
func e2bAdvertiseURL(c ClusterConfig, listen string) (string, error) {
	if listen == "" || c.E2BAdvertiseURL != "" {
		return c.E2BAdvertiseURL, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--e2b-listen: %w", err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		u, err := url.Parse(c.AdvertiseURL)
		if err != nil || u.Hostname() == "" {
			return "", fmt.Errorf("cluster mode: --e2b-listen %s has no host gateways can reach; pass --e2b-advertise-url", listen)
		}
		host = u.Hostname()
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// events chains the node's Poke after next (the metrics' event counter).
func (c *clusterNode) events(next func(string)) func(string) {
	if c == nil {
		return next
	}
	return func(name string) { next(name); c.node.Poke() }
}

// start registers the node and syncs keys and sandboxes once (so the node
// is routable when it starts serving), then keeps them in step until ctx
// ends.
func (c *clusterNode) start(ctx context.Context, log *slog.Logger) error {
	if c == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.node.Sync(sctx); err != nil {
		return fmt.Errorf("cluster mode: first sync: %w", err)
	}
	go c.node.Run(ctx)
	log.Info("cluster mode: node registered")
	return nil
}
