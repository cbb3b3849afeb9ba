package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// BenchmarkSurface (make bench-surface) measures what the daemon-surface
// attacks of issue 16 cost another tenant: bob's exec latency (p50, p99
// of 100 sequential `true` execs) quiet and under each attack, and the
// daemon's peak RSS (sampled every 20 ms) during each. It runs a daemon
// of its own with the default limits.
func BenchmarkSurface(b *testing.B) {
	d := startSurfaceDaemon(b, 760)
	ctx := context.Background()
	bob := newSandboxOn(b, d, 1, nil)
	alice := newSandboxOn(b, d, 0, nil)
	if _, err := alice.Files().Write(ctx, "h.py", []byte(headerServer), 0); err != nil {
		b.Fatal(err)
	}
	if _, err := alice.Start(ctx, api.ExecRequest{Command: "python3 h.py"}); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second) // the header server starts
	pid := d.cmd.Process.Pid
	blob := bytes.Repeat([]byte("A"), 90<<20)
	tplBody := append(append([]byte(`{"name":"bad name!","recipe":{"from":"base","steps":[{"run":"true"}]},"context":{"f":"`), blob...), `"}}`...)

	attacks := []struct {
		name string
		run  func(stop <-chan struct{})
	}{
		{"quiet", func(stop <-chan struct{}) { <-stop }},
		{"fd exhaustion (3,000 stalled connections)", func(stop <-chan struct{}) {
			var conns []net.Conn
			for range 3000 {
				c, err := dialFrom(d, attackerAddr)
				if err != nil {
					continue
				}
				fmt.Fprintf(c, "POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
				conns = append(conns, c)
			}
			<-stop
			for _, c := range conns {
				c.Close()
			}
		}},
		{"stalled bodies (alice: 8 x 20 MiB exec bodies)", func(stop <-chan struct{}) {
			var conns []net.Conn
			for {
				for range 8 {
					conns = append(conns, stalledExec(b, d, d.keys[0], alice.ID, 20<<20, 1<<20))
				}
				select {
				case <-stop:
					for _, c := range conns {
						c.Close()
					}
					return
				case <-time.After(2 * time.Second):
				}
			}
		}},
		{"proxy headers (40 concurrent 1 MiB-header answers)", func(stop <-chan struct{}) {
			url := fmt.Sprintf("%s/v1/sandboxes/%s/ports/8000/", d.url, alice.ID)
			loop(40, stop, func() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+d.keys[0])
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}},
		{"template bodies (8 concurrent 90 MiB JSON)", func(stop <-chan struct{}) {
			loop(8, stop, func() {
				req, _ := http.NewRequest("POST", d.url+"/v1/templates", bytes.NewReader(tplBody))
				req.Header.Set("Authorization", "Bearer "+d.keys[0])
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}},
	}
	for _, a := range attacks {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { a.run(stop); close(done) }()
		var peak atomic.Int64
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				peak.Store(max(peak.Load(), procStatusKiB(pid, "VmRSS")))
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		time.Sleep(2 * time.Second) // the attack builds up
		lat := make([]time.Duration, 0, 100)
		failed := 0
		for range 100 {
			start := time.Now()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			_, err := bob.Exec(cctx, api.ExecRequest{Argv: []string{"true"}})
			cancel()
			if err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(start))
		}
		close(stop)
		<-done
		<-sampled
		slices.Sort(lat)
		pct := func(p float64) time.Duration {
			if len(lat) == 0 {
				return 0
			}
			return lat[min(len(lat)-1, int(float64(len(lat))*p))]
		}
		fmt.Printf("surface: %-52s bob exec p50 %6.1f ms  p99 %7.1f ms  failed %d/100  daemon peak RSS %4d MiB\n",
			a.name, ms(pct(0.50)), ms(pct(0.99)), failed, peak.Load()>>10)
	}
}

// loop runs f on n goroutines until stop is closed.
func loop(n int, stop <-chan struct{}, f func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					f()
				}
			}
		}()
	}
	wg.Wait()
}
