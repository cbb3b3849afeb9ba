package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// TestScaleOut: creates through one gateway spread over three nodes; exec
// and files work through either gateway; keys are per tenant across the
// cluster; one gateway down, the other serves; one node down, its
// sandboxes are reported lost within the Lease time while the others and
// new creates work; the node restarted, it re-adopts its sandboxes.
func TestScaleOut(t *testing.T) {
	l := startLab(t, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	alice := l.client(0, 0)

	const n, workers = 30, 5
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				sb, err := alice.Create(ctx, &api.CreateSandboxRequest{Metadata: map[string]string{"i": fmt.Sprint(i)}})
				if errs[i] = err; err == nil {
					ids[i] = sb.ID
				}
			}
		}()
	}
	wg.Wait()
	perNode := map[string][]string{}
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		node := l.nodeOf(ctx, id)
		perNode[node] = append(perNode[node], id)
	}
	t.Logf("placement: %v", counts(perNode))
	if len(perNode) != 3 {
		t.Fatalf("creates did not spread over the 3 nodes: %v", counts(perNode))
	}

	t.Run("exec and files through either gateway", func(t *testing.T) {
		for i, id := range ids {
			g1, g2 := l.client(i%2, 0), l.client((i+1)%2, 0)
			if _, err := g1.Sandbox(id).Files().Write(ctx, "hello.txt", []byte("hi "+id), 0o644); err != nil {
				t.Fatalf("write %s: %v", id, err)
			}
			out, err := exec1(ctx, g2, id, "cat hello.txt")
			if err != nil || out != "hi "+id {
				t.Fatalf("exec %s through the other gateway: %q, %v", id, out, err)
			}
			b, err := g2.Sandbox(id).Files().Read(ctx, "hello.txt")
			if err != nil || string(b) != "hi "+id {
				t.Fatalf("read %s: %q, %v", id, b, err)
			}
		}
	})

	t.Run("list merges the nodes", func(t *testing.T) {
		got := 0
		for _, err := range l.client(1, 0).All(ctx, client.ListOptions{Limit: 4}) {
			if err != nil {
				t.Fatal(err)
			}
			got++
		}
		if got != n {
			t.Fatalf("listed %d sandboxes through the gateway, want %d", got, n)
		}
	})

	t.Run("another key sees nothing", func(t *testing.T) {
		bob := l.client(1, 1)
		if _, err := exec1(ctx, bob, ids[0], "true"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("bob's exec on alice's sandbox: %v, want not found", err)
		}
		resp, err := http.Get(l.gwURLs[0] + "/v1/sandboxes")
		if err != nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no key: %v %v, want 401", resp.StatusCode, err)
		}
		resp.Body.Close()
	})

	t.Run("ports through the gateways", func(t *testing.T) { checkPorts(t, l, ctx, ids[1]) })

	t.Run("secrets reach every node", func(t *testing.T) {
		if _, err := alice.CreateSecret(ctx, api.CreateSecretRequest{Name: "TOKEN", Value: "s3cret", Hosts: []string{"example.com"}}); err != nil {
			t.Fatalf("create secret through the gateway: %v", err)
		}
		for _, nd := range l.nodes {
			got, err := client.New("http://"+nd.listen, l.keys[0]).Secrets(ctx)
			if err != nil || len(got) != 1 || got[0].Name != "TOKEN" {
				t.Fatalf("secrets on %s: %+v %v", nd.name, got, err)
			}
		}
		if err := l.client(1, 0).DeleteSecret(ctx, "TOKEN"); err != nil {
			t.Fatalf("delete secret through the gateway: %v", err)
		}
		for _, nd := range l.nodes {
			if got, err := client.New("http://"+nd.listen, l.keys[0]).Secrets(ctx); err != nil || len(got) != 0 {
				t.Fatalf("secrets on %s after delete: %+v %v", nd.name, got, err)
			}
		}
	})

	t.Run("leases end on every node and the records follow", func(t *testing.T) {
		var short []string
		for range 3 {
			sb, err := alice.Create(ctx, &api.CreateSandboxRequest{TimeoutSeconds: 2})
			if err != nil {
				t.Fatal(err)
			}
			short = append(short, sb.ID)
		}
		for _, id := range short {
			var state string
			for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(250 * time.Millisecond) {
				sb, err := l.client(1, 0).Get(ctx, id)
				if err != nil {
					t.Fatalf("get %s: %v", id, err)
				}
				if state = sb.State; state == "terminated" && l.statusOf(ctx, id) == "terminated" {
					break
				}
			}
			if state != "terminated" || l.statusOf(ctx, id) != "terminated" {
				t.Fatalf("%s on %s after its 2 s lease: api %q, resource status %q", id, l.nodeOf(ctx, id), state, l.statusOf(ctx, id))
			}
		}
	})

	t.Run("one gateway down, the other serves", func(t *testing.T) {
		l.gateways[0].stop(syscall.SIGKILL)
		for _, id := range ids {
			if out, err := exec1(ctx, l.client(1, 0), id, "echo ok"); err != nil || out != "ok" {
				t.Fatalf("exec %s through gateway 2: %q %v", id, out, err)
			}
		}
	})

	gw := l.client(1, 0)
	victim := l.nodes[2]
	t.Run("one node down: its sandboxes lost, others and creates work", func(t *testing.T) {
		killed := time.Now()
		victim.p.stop(syscall.SIGKILL)
		lost := perNode[victim.name][0]
		var err error
		for time.Since(killed) < 3*leaseSeconds*time.Second {
			if _, err = exec1(ctx, gw, lost, "true"); isLost(err) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !isLost(err) {
			t.Fatalf("exec on a sandbox of the killed node: %v, want sandbox lost", err)
		}
		t.Logf("reported lost %v after the kill (Lease %ds): %v", time.Since(killed).Round(100*time.Millisecond), leaseSeconds, err)
		for node, nids := range perNode {
			for _, id := range nids {
				_, err := exec1(ctx, gw, id, "true")
				if node == victim.name && !isLost(err) {
					t.Errorf("%s on the lost node: %v, want lost", id, err)
				}
				if node != victim.name && err != nil {
					t.Errorf("%s on live %s: %v", id, node, err)
				}
			}
		}
		for range 2 {
			sb, err := gw.Create(ctx, &api.CreateSandboxRequest{})
			if err != nil {
				t.Fatalf("create with a node down: %v", err)
			}
			if node := l.nodeOf(ctx, sb.ID); node == victim.name {
				t.Fatalf("create placed on the lost node")
			}
			sb.Close()
		}
	})

	t.Run("restarted node re-adopts its sandboxes", func(t *testing.T) {
		l.startNode(2)
		for _, id := range perNode[victim.name] {
			var out string
			var err error
			for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(200 * time.Millisecond) {
				if out, err = exec1(ctx, gw, id, "cat hello.txt"); err == nil {
					break
				}
			}
			if err != nil || out != "hi "+id {
				t.Fatalf("%s after its node's restart: %q %v", id, out, err)
			}
			info, err := gw.Get(ctx, id)
			if err != nil || info.State != "running" {
				t.Fatalf("%s record after restart: %+v %v", id, info, err)
			}
		}
	})

	t.Run("delete through the gateway removes the resource", func(t *testing.T) {
		id := ids[0]
		if err := gw.Sandbox(id).Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := exec1(ctx, gw, id, "true"); err == nil {
			t.Fatalf("exec on a deleted sandbox succeeded")
		}
	})
}

func counts(m map[string][]string) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}
