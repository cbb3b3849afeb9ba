package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// BenchmarkCluster prints, in one run on one lab (3 nodes, 2 gateways):
// create → first exec result → delete, directly on a node and through a
// gateway; and creates/s through one gateway with 10 concurrent clients
// spread over the three nodes. Run with `make k8s-bench`.
func BenchmarkCluster(b *testing.B) {
	l := startLab(b, 3, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	firstResult := func(b *testing.B, c *client.Client) {
		for b.Loop() {
			sb, err := c.Create(ctx, &api.CreateSandboxRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if out, err := exec1(ctx, c, sb.ID, "echo ok"); err != nil || out != "ok" {
				b.Fatalf("exec: %q %v", out, err)
			}
			sb.Close()
		}
	}
	b.Run("create-first-result/direct", func(b *testing.B) {
		firstResult(b, client.New("http://"+l.nodes[0].listen, l.keys[0]))
	})
	b.Run("create-first-result/gateway", func(b *testing.B) {
		firstResult(b, l.client(0, 0))
	})
	b.Run("creates-per-second/3-nodes", func(b *testing.B) {
		const total, workers = 30, 10
		for b.Loop() {
			var mu sync.Mutex
			var ids []string
			var firstErr error
			start := time.Now()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := l.client(w%2, 0)
					for range total / workers {
						sb, err := c.Create(ctx, &api.CreateSandboxRequest{})
						mu.Lock()
						if err != nil && firstErr == nil {
							firstErr = err
						}
						if err == nil {
							ids = append(ids, sb.ID)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			b.ReportMetric(float64(total)/el.Seconds(), "creates/s")
			per := map[string]int{}
			for _, id := range ids {
				per[l.nodeOf(ctx, id)]++
			}
			b.Logf("%d creates in %v over %v", total, el.Round(time.Millisecond), per)
			b.StopTimer()
			for _, id := range ids {
				l.client(0, 0).Sandbox(id).Close()
			}
			b.StartTimer()
		}
	})
}
