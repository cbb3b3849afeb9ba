package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkProxy compares the proxy with a direct connection to the same
// local upstream, in the same run, request by request (the two alternate,
// so both see the same machine state).
//
//   - throughput/*: one large download per iteration each way; reports
//     direct-MB/s and proxy-MB/s.
//   - latency/*: one small request per iteration each way on keep-alive
//     connections (newconn: a new connection per request); reports p50 and
//     p99 of each and the difference ("added").
//
// http is parsed plain HTTP, https is spliced TLS (SNI passthrough), and
// inject is TLS the proxy terminates to substitute a secret.
func BenchmarkProxy(b *testing.B) {
	w := newWorld(b, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com", "other.example.com"))
	ph := Placeholder("BENCH")
	w.setSecrets("sb1", Secret{Name: "BENCH", Value: "real-value-123456", Placeholder: ph, Hosts: []string{"other.example.com"}})

	direct := func(newConn bool) *http.Client {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				if _, port, _ := net.SplitHostPort(addr); port == "443" {
					return d.DialContext(ctx, "tcp", w.tlsSrv.Listener.Addr().String())
				}
				return d.DialContext(ctx, "tcp", w.plainSrv.Listener.Addr().String())
			},
			TLSClientConfig:    &tls.Config{RootCAs: w.internetPool},
			DisableCompression: true,
			DisableKeepAlives:  newConn,
		}
		return &http.Client{Transport: tr}
	}
	viaProxy := func(newConn bool, inject bool) *http.Client {
		roots := w.internetPool
		if inject {
			roots = w.caPool
		}
		c := w.client(srcSB1, roots)
		c.Transport.(*http.Transport).DisableKeepAlives = newConn
		return c
	}
	do := func(b *testing.B, c *http.Client, url string) (int64, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%s: %d %v", url, resp.StatusCode, err)
		}
		return n, time.Since(start)
	}

	const big = 32 << 20
	for _, tc := range []struct{ name, url string }{
		{"http", "http://api.example.com/big?n=%d"},
		{"https", "https://api.example.com/big?n=%d"},
		{"inject", "https://other.example.com/big?n=%d"},
	} {
		b.Run("throughput/"+tc.name, func(b *testing.B) {
			dc, pc := direct(false), viaProxy(false, tc.name == "inject")
			url := fmt.Sprintf(tc.url, big)
			var dBytes, pBytes int64
			var dTime, pTime time.Duration
			for b.Loop() {
				n, d := do(b, dc, url)
				dBytes, dTime = dBytes+n, dTime+d
				n, d = do(b, pc, url)
				pBytes, pTime = pBytes+n, pTime+d
			}
			b.ReportMetric(float64(dBytes)/1e6/dTime.Seconds(), "direct-MB/s")
			b.ReportMetric(float64(pBytes)/1e6/pTime.Seconds(), "proxy-MB/s")
		})
	}
	for _, tc := range []struct {
		name, url string
		newConn   bool
	}{
		{"http", "http://api.example.com/small", false},
		{"https", "https://api.example.com/small", false},
		{"inject", "https://other.example.com/small", false},
		{"http-newconn", "http://api.example.com/small", true},
		{"https-newconn", "https://api.example.com/small", true},
	} {
		b.Run("latency/"+tc.name, func(b *testing.B) {
			dc, pc := direct(tc.newConn), viaProxy(tc.newConn, tc.name == "inject")
			do(b, dc, tc.url) // warm: connections, leaf certificate
			do(b, pc, tc.url)
			var dl, pl []time.Duration
			for b.Loop() {
				_, d := do(b, dc, tc.url)
				dl = append(dl, d)
				_, d = do(b, pc, tc.url)
				pl = append(pl, d)
			}
			dp50, dp99 := percentiles(dl)
			pp50, pp99 := percentiles(pl)
			b.ReportMetric(us(dp50), "direct-p50-µs")
			b.ReportMetric(us(dp99), "direct-p99-µs")
			b.ReportMetric(us(pp50), "proxy-p50-µs")
			b.ReportMetric(us(pp99), "proxy-p99-µs")
			b.ReportMetric(us(pp50-dp50), "added-p50-µs")
			b.ReportMetric(us(pp99-dp99), "added-p99-µs")
		})
	}
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
