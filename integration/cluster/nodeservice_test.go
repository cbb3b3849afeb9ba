package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// labNodePort is an extra Service of the node lab's overlay: the gateway
// pods behind a NodePort (deploy/kubernetes defines only the ClusterIP
// Service "paddock"), to show kube-proxy's NodePort rules too.
const labNodePort = `apiVersion: v1
kind: Service
metadata: {name: paddock-nodeport, namespace: paddock}
spec:
  type: NodePort
  selector: {app.kubernetes.io/name: paddock-gateway}
  ports:
    - {name: api, port: 80, targetPort: api}
`

// gatewayEndpoints are the addresses of a Service's EndpointSlices by
// readiness.
func gatewayEndpoints(ctx context.Context, kc *kube.Client, svc string) (ready, notReady []string, err error) {
	var l struct {
		Items []struct {
			Endpoints []struct {
				Addresses  []string `json:"addresses"`
				Conditions struct {
					Ready *bool `json:"ready"`
				} `json:"conditions"`
			} `json:"endpoints"`
		} `json:"items"`
	}
	if err := kc.Get(ctx, "/apis/discovery.k8s.io/v1/namespaces/"+ns+"/endpointslices?labelSelector=kubernetes.io/service-name%3D"+svc, &l); err != nil {
		return nil, nil, err
	}
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready = append(ready, e.Addresses...)
			} else {
				notReady = append(notReady, e.Addresses...)
			}
		}
	}
	slices.Sort(ready)
	return ready, notReady, nil
}

// waitEndpoints waits until svc has n ready endpoints and none of drop.
func waitEndpoints(t *testing.T, ctx context.Context, kc *kube.Client, svc string, n int, drop string) []string {
	for {
		ready, _, err := gatewayEndpoints(ctx, kc, svc)
		if err == nil && len(ready) == n && (drop == "" || !slices.Contains(ready, drop)) {
			return ready
		}
		if ctx.Err() != nil {
			t.Fatalf("Service %s: want %d ready endpoints (not %q), have %v (%v)", svc, n, drop, ready, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freshClient sends every request on a new connection, so each one is
// balanced anew by kube-proxy's rules (they act per connection).
func freshClient(url, key string) *client.Client {
	c := client.New(url, key)
	c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return c
}

// checkGatewayService drives the deploy/kubernetes gateway through its
// Service's ClusterIP (kube-proxy's rules in the node's netns, where this
// test runs, cover host-originated traffic) and through the overlay's
// NodePort: a sandbox, exec, a file written and read back, its deletion;
// then the latency through the Service against a gateway pod's IP; then
// one gateway pod is deleted and the other keeps serving at the same
// Service IP. The gateways reach the API server only at the `kubernetes`
// Service (10.96.0.1, injected by kubelet; no address of the lab is
// 10.96.0.1, so only kube-proxy's DNAT gets there): keys they accept and
// nodes they route to prove that path, and so do kube-proxy's counters
// (checkAPIThroughService).
func checkGatewayService(t *testing.T, ctx context.Context, kc *kube.Client, kubectl, kcPath, key string) {
	var svc struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
			Ports     []struct {
				Port     int `json:"port"`
				NodePort int `json:"nodePort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	must(t, kc.Get(ctx, "/api/v1/namespaces/"+ns+"/services/paddock", &svc))
	svcURL := fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	must(t, kc.Get(ctx, "/api/v1/namespaces/"+ns+"/services/paddock-nodeport", &svc))
	nodePortURL := fmt.Sprintf("http://%s:%d", nodeIP, svc.Spec.Ports[0].NodePort)
	start := time.Now()
	pods := waitEndpoints(t, ctx, kc, "paddock", 2, "")
	t.Logf("gateway Service %s: 2 ready endpoints %v after %v", svcURL, pods, time.Since(start).Round(time.Millisecond))

	viaSvc := freshClient(svcURL, key)
	// the gateways learn keys and nodes from the API server through 10.96.0.1: retry until they have
	var sb *client.Sandbox
	for sb == nil {
		var err error
		if sb, err = viaSvc.Create(ctx, &api.CreateSandboxRequest{}); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("create through the Service %s: %v", svcURL, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("create through the Service answered %v after the endpoints were ready", time.Since(start).Round(time.Millisecond))
	id := sb.ID
	// a failure below must not leave the sandbox (and its cgroup) to the DaemonSet's removal:
	// delete it at the node (runs before the manifests' removal, registered earlier)
	t.Cleanup(func() {
		if t.Failed() {
			_ = client.New("http://"+nodeIP.String()+":7419", key).Sandbox(id).Kill(context.Background())
		}
	})
	checkAPIThroughService(t, ctx, kc)
	for i, c := range []*client.Client{viaSvc, freshClient(nodePortURL, key)} {
		o, err := exec1(ctx, c, id, fmt.Sprintf("echo via-%d; cat /tmp/f 2>/dev/null; true", i))
		if err != nil || !strings.HasPrefix(o, fmt.Sprintf("via-%d", i)) {
			t.Fatalf("exec through %s: %q %v", c.BaseURL, o, err)
		}
		data := fmt.Sprintf("written through %s", c.BaseURL)
		if _, err := c.Sandbox(id).Files().Write(ctx, "/tmp/f", []byte(data), 0o644); err != nil {
			t.Fatalf("file write through %s: %v", c.BaseURL, err)
		}
		if b, err := c.Sandbox(id).Files().Read(ctx, "/tmp/f"); err != nil || string(b) != data {
			t.Fatalf("file read through %s: %q %v", c.BaseURL, b, err)
		}
	}

	checkServicePort(t, ctx, viaSvc, id, svcURL)

	// latency: GET the sandbox (gateway -> node) on a new connection each time, through the
	// Service and straight at one gateway pod, interleaved
	direct := freshClient("http://"+pods[0]+":7420", key)
	var dSvc, dPod []time.Duration
	for range 30 {
		for _, x := range []struct {
			c *client.Client
			d *[]time.Duration
		}{{viaSvc, &dSvc}, {direct, &dPod}} {
			t0 := time.Now()
			if _, err := x.c.Get(ctx, id); err != nil {
				t.Fatalf("get through %s: %v", x.c.BaseURL, err)
			}
			*x.d = append(*x.d, time.Since(t0))
		}
	}
	ms, mp := median(dSvc), median(dPod)
	t.Logf("GET sandbox, new connection each, median of %d: through the Service %v, straight to a gateway pod %v (ratio %.2f); p90 %v vs %v",
		len(dSvc), ms, mp, float64(ms)/float64(mp), pct(dSvc, 90), pct(dPod, 90))

	// one gateway pod goes; the other keeps serving at the same Service IP
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kcPath, "-n", ns, "get", "pods",
		"-l", "app.kubernetes.io/name=paddock-gateway", "--field-selector", "status.podIP="+pods[0], "-o", "name").CombinedOutput()
	victim := strings.TrimSpace(string(out))
	if err != nil || victim == "" {
		t.Fatalf("the gateway pod at %s: %v %s", pods[0], err, out)
	}
	t0 := time.Now()
	if out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kcPath, "-n", ns, "delete", victim, "--wait=false").CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete %s: %v\n%s", victim, err, out)
	}
	// requests while the endpoint goes away: counted, not required (the pod is terminating)
	failed, sent := 0, 0
	for ready, _, _ := gatewayEndpoints(ctx, kc, "paddock"); slices.Contains(ready, pods[0]); ready, _, _ = gatewayEndpoints(ctx, kc, "paddock") {
		sent++
		if _, err := viaSvc.Get(ctx, id); err != nil {
			failed++
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never left the Service's ready endpoints", victim)
		}
	}
	t.Logf("%s deleted: out of the Service's ready endpoints after %v (%d of %d requests meanwhile failed)",
		victim, time.Since(t0).Round(time.Millisecond), failed, sent)
	for i := range 20 {
		if _, err := viaSvc.Get(ctx, id); err != nil {
			t.Fatalf("request %d through the Service with one gateway pod gone: %v", i, err)
		}
	}
	if o, err := exec1(ctx, viaSvc, id, "cat /tmp/f"); err != nil || !strings.HasPrefix(o, "written through") {
		t.Fatalf("exec through the Service with one gateway pod gone: %q %v", o, err)
	}
	if err := viaSvc.Sandbox(id).Kill(ctx); err != nil {
		t.Fatalf("delete through the Service: %v", err)
	}
	t.Logf("20 requests, an exec and the delete through %s with %s gone: all answered", svcURL, victim)
}

func median(d []time.Duration) time.Duration { return pct(d, 50) }

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// checkServicePort: a port of the sandbox (busybox httpd on 8000), listed
// through the Service, is proxied through it with the key and with the
// signed URL.
func checkServicePort(t *testing.T, ctx context.Context, c *client.Client, id, svcURL string) {
	sb := c.Sandbox(id)
	if o, err := exec1(ctx, c, id, "mkdir -p /tmp/www && echo port-ok > /tmp/www/index.html"); err != nil {
		t.Fatalf("port page: %q %v", o, err)
	}
	if _, err := sb.Start(ctx, api.ExecRequest{Argv: []string{"busybox", "httpd", "-f", "-p", "127.0.0.1:8000", "-h", "/tmp/www"}}); err != nil {
		t.Fatal(err)
	}
	var ports []api.Port
	for start := time.Now(); time.Since(start) < 15*time.Second && len(ports) == 0; time.Sleep(100 * time.Millisecond) {
		var err error
		if ports, err = sb.Ports(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(ports) != 1 || ports[0].Port != 8000 || !strings.HasPrefix(ports[0].URL, svcURL) {
		t.Fatalf("ports through the Service %s: %+v", svcURL, ports)
	}
	for _, x := range []struct{ url, key string }{{ports[0].URL, c.APIKey}, {ports[0].SignedURL, ""}} {
		req, _ := http.NewRequestWithContext(ctx, "GET", x.url, nil)
		if x.key != "" {
			req.Header.Set("Authorization", "Bearer "+x.key)
		}
		resp, err := c.HTTPClient.Do(req)
		if err != nil {
			t.Fatalf("port 8000 through the Service: %v", err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "port-ok\n" {
			t.Fatalf("port 8000 through the Service (%s): %d %q", x.url, resp.StatusCode, b)
		}
	}
	t.Logf("port 8000 of the sandbox through the Service: %s (key and signed URL)", ports[0].URL)
}

// checkAPIThroughService: the `kubernetes` Service's endpoint is the API
// server at the node IP, and connections from the pod network (the gateway
// pods: paddockd is on the host network) to 10.96.0.1:443 went through
// kube-proxy's rules: iptables-save's counters (one per connection in the
// nat table) of the Service's rule, minus those of its rule for sources
// outside the cluster CIDR.
func checkAPIThroughService(t *testing.T, ctx context.Context, kc *kube.Client) {
	var eps struct {
		Items []struct {
			Endpoints []struct {
				Addresses []string `json:"addresses"`
			} `json:"endpoints"`
			Ports []struct {
				Port int `json:"port"`
			} `json:"ports"`
		} `json:"items"`
	}
	must(t, kc.Get(ctx, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io/service-name%3Dkubernetes", &eps))
	if len(eps.Items) != 1 || len(eps.Items[0].Endpoints) != 1 || len(eps.Items[0].Ports) != 1 ||
		!slices.Equal(eps.Items[0].Endpoints[0].Addresses, []string{nodeIP.String()}) || eps.Items[0].Ports[0].Port != 26443 {
		t.Fatalf("the kubernetes Service's EndpointSlices: %+v, want %s:26443", eps.Items, nodeIP)
	}
	out, err := exec.CommandContext(ctx, "iptables-save", "-c", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save -c -t nat (in the node's netns): %v %s", err, out)
	}
	all, notPods, err := apiServiceConns(string(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if all-notPods < 1 {
		t.Fatalf("no connection from the pod network to 10.96.0.1:443 went through kube-proxy's rules (%d in all, %d from outside the pod network)", all, notPods)
	}
	t.Logf("connections to 10.96.0.1:443 through kube-proxy's rules (-> %s:26443): %d from the pod network (the gateways), %d from the node (paddockd, host network)",
		nodeIP, all-notPods, notPods)
}

// apiServiceConns reads iptables-save -c output: in the chain that
// kube-proxy's KUBE-SERVICES rule for 10.96.0.1:443 jumps to, the packet
// counters (one per connection in the nat table) of its jumps to the
// endpoints (all connections) and of its KUBE-MARK-MASQ rule for sources
// outside the cluster CIDR. (KUBE-SERVICES' own counters restart with
// each sync, which rewrites that chain.)
func apiServiceConns(save string) (all, notPods int64, err error) {
	lines := strings.Split(save, "\n")
	svc := ""
	for _, l := range lines {
		if strings.Contains(l, "-A KUBE-SERVICES -d 10.96.0.1/32 ") && strings.Contains(l, "--dport 443 ") {
			if f := strings.Fields(l); strings.HasPrefix(f[len(f)-1], "KUBE-SVC-") {
				svc = f[len(f)-1]
			}
		}
	}
	if svc == "" {
		return 0, 0, errors.New("no KUBE-SERVICES rule for 10.96.0.1:443 in iptables-save")
	}
	seen := 0
	for _, l := range lines {
		var pkts, bytes int64
		if !strings.Contains(l, "-A "+svc+" ") {
			continue
		}
		if _, err := fmt.Sscanf(l, "[%d:%d]", &pkts, &bytes); err != nil {
			return 0, 0, fmt.Errorf("no counters (iptables-save -c) in %q", l)
		}
		switch f := strings.Fields(l); {
		case strings.HasPrefix(f[len(f)-1], "KUBE-SEP-"):
			all += pkts
			seen |= 1
		case strings.Contains(l, " ! -s ") && f[len(f)-1] == "KUBE-MARK-MASQ":
			notPods += pkts
			seen |= 2
		}
	}
	if seen != 3 {
		return 0, 0, fmt.Errorf("chain %s: no endpoint jump or no KUBE-MARK-MASQ rule for sources outside the cluster CIDR (have %b)", svc, seen)
	}
	return all, notPods, nil
}

func TestAPIServiceConns(t *testing.T) {
	const save = `*nat
[3:180] -A KUBE-SEP-Y7VH -s 10.200.0.1/32 -m comment --comment "default/kubernetes:https" -j KUBE-MARK-MASQ
[5:300] -A KUBE-SEP-Y7VH -p tcp -m comment --comment "default/kubernetes:https" -m tcp -j DNAT --to-destination 10.200.0.1:26443
[0:0] -A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-SVC-NPX4
[0:0] -A KUBE-SERVICES -d 10.96.1.2/32 -p tcp -m comment --comment "paddock/paddock:api cluster IP" -m tcp --dport 80 -j KUBE-SVC-OTHER
[3:180] -A KUBE-SVC-NPX4 ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "default/kubernetes:https cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ
[5:300] -A KUBE-SVC-NPX4 -m comment --comment "default/kubernetes:https -> 10.200.0.1:26443" -j KUBE-SEP-Y7VH
[9:540] -A KUBE-SVC-OTHER -m comment --comment "x" -j KUBE-SEP-ZZZ
COMMIT`
	for _, c := range []struct {
		name, save   string
		all, notPods int64
		err          bool
	}{
		{"counted", save, 5, 3, false},
		{"no service rule", strings.ReplaceAll(save, "10.96.0.1/32", "10.96.0.9/32"), 0, 0, true},
		{"no masquerade rule", strings.ReplaceAll(save, "! -s", "-s"), 0, 0, true},
		{"no counters", strings.ReplaceAll(save, "[5:300] -A KUBE-SVC", "-A KUBE-SVC"), 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			all, notPods, err := apiServiceConns(c.save)
			if (err != nil) != c.err || all != c.all || notPods != c.notPods {
				t.Fatalf("got %d %d %v, want %d %d err=%v", all, notPods, err, c.all, c.notPods, c.err)
			}
		})
	}
}
