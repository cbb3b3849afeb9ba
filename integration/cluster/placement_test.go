package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/cluster"
)

// TestTemplatePlacement: creates go to a node whose Lease lists the
// template, an idle warm-pool sandbox of it wins over a lighter load, and
// a template no node has answers 4xx unknown_template. node1 has tpl-a
// (one idle pool sandbox) and tpl-b, node2 tpl-a (no pool), node3
// neither.
func TestTemplatePlacement(t *testing.T) {
	l := newLab(t)
	l.configs = map[int]string{
		0: `{"network": {"disabled": true}, "templates": {"tpl-a": {"runtime": "runc"}, "tpl-b": {"runtime": "runc"}},
			"warm_pool": {"base": 0, "tpl-a": {"min": 1, "max": 1}}}`,
		1: `{"network": {"disabled": true}, "templates": {"tpl-a": {"runtime": "runc"}}, "warm_pool": {"base": 0, "tpl-a": 0}}`,
		2: `{"network": {"disabled": true}, "warm_pool": {"base": 0}}`,
	}
	l.setup()
	l.addNodes(3)
	l.addGateways(1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := l.client(0, 0)

	// node1's Lease lists its templates and, once the pool is warm, its idle sandbox
	var ann map[string]string
	for deadline := time.Now().Add(time.Minute); ; {
		var ls cluster.Lease
		if err := l.kc.Get(ctx, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/paddock-node-node1", &ls); err != nil {
			t.Fatal(err)
		}
		ann = ls.Metadata.Annotations
		if ann["paddock.dev/idle"] == "tpl-a=1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node1's Lease never showed its idle tpl-a sandbox: %v", ann)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(ann["paddock.dev/templates"], "tpl-a") || !strings.Contains(ann["paddock.dev/templates"], "tpl-b") ||
		ann["paddock.dev/templates-open"] != "true" {
		t.Fatalf("node1's Lease annotations %v", ann)
	}
	t.Logf("node1 Lease: templates %q idle %q", ann["paddock.dev/templates"], ann["paddock.dev/idle"])

	create := func(tpl string) string {
		t.Helper()
		sb, err := c.Create(ctx, &api.CreateSandboxRequest{Template: tpl, TimeoutSeconds: 300})
		if err != nil {
			t.Fatalf("create %s: %v", tpl, err)
		}
		t.Cleanup(func() { sb.Kill(context.Background()) })
		return l.nodeOf(ctx, sb.ID)
	}
	// tpl-b: only node1 has it, however loaded
	for i := range 3 {
		if n := create("tpl-b"); n != "node1" {
			t.Fatalf("tpl-b create %d on %s, want node1", i, n)
		}
	}
	// tpl-a: node1 (3 live) has an idle one, node2 (0 live) does not
	if n := create("tpl-a"); n != "node1" {
		t.Fatalf("tpl-a create on %s, want node1 (idle pool sandbox)", n)
	}
	// a template no node has: 4xx unknown_template, naming it
	_, err := c.Create(ctx, &api.CreateSandboxRequest{Template: "no-such-template"})
	var ae *client.APIError
	if !errors.Is(err, client.ErrUnknownTemplate) || !errors.As(err, &ae) || ae.StatusCode/100 != 4 ||
		!strings.Contains(err.Error(), "no-such-template") {
		t.Fatalf("create of an unknown template: %v, want 4xx unknown_template naming it", err)
	}
	t.Logf("unknown template: %v", err)
}
