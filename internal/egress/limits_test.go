package egress

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConnectionCap10000(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 connections")
	}
	const cap = 64
	const attempts = 10000
	// A long peek timeout keeps the connections inside the cap open for
	// the whole test, however slow the machine.
	w := newWorld(t, worldOpts{maxConns: cap, peekTimeout: 5 * time.Minute})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	// Direct dialling, no OriginalDst map entries needed for refused
	// connections; allowed ones wait in the ClientHello peek.
	w.mu.Lock()
	w.fixedDst = netip.AddrPortFrom(pubAPI, 443)
	w.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()

	var mu sync.Mutex
	var conns []net.Conn
	var refused, dialErrs, maxSeen atomic.Int64
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: srcSB1.AsSlice()}}
			for range jobs {
				c, err := d.Dial("tcp", w.ln[443].Addr().String())
				if err != nil {
					dialErrs.Add(1)
					continue
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				if n := int64(w.proxy.Conns("sb1")); n > maxSeen.Load() {
					maxSeen.Store(n)
				}
			}
		}()
	}
	for i := range attempts {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if dialErrs.Load() > 0 {
		t.Logf("%d dial errors", dialErrs.Load())
	}
	if ms := maxSeen.Load(); ms > cap {
		t.Fatalf("saw %d live connections, cap %d", ms, cap)
	}
	// Every connection over the cap is closed by the proxy at once.
	var rwg sync.WaitGroup
	idx := make(chan net.Conn)
	for range 64 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			buf := make([]byte, 1)
			for c := range idx {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					refused.Add(1)
				}
			}
		}()
	}
	for _, c := range conns {
		idx <- c
	}
	close(idx)
	rwg.Wait()
	t.Logf("%d attempts, %d connected, %d closed by the proxy, cap %d, goroutines during: %d (base %d)",
		attempts, len(conns), refused.Load(), cap, runtime.NumGoroutine(), base)
	if want := int64(len(conns) - cap); refused.Load() < want {
		t.Fatalf("only %d connections refused, want at least %d", refused.Load(), want)
	}
	if n := w.proxy.Conns("sb1"); n != cap {
		t.Fatalf("%d live connections, want the cap %d", n, cap)
	}
	for _, c := range conns {
		c.Close()
	}
	// Everything is released: connections, goroutines.
	waitFor(t, 10*time.Second, "connections released", func() bool { return w.proxy.Conns("sb1") == 0 })
	waitFor(t, 10*time.Second, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base })

	// The proxy still serves.
	w.mu.Lock()
	w.fixedDst = netip.AddrPort{}
	w.mu.Unlock()
	if code, _, _, err := get(t, w.client(srcSB1, w.internetPool), "https://api.example.com/"); code != 200 {
		t.Fatalf("after the storm: %d %v", code, err)
	}
}

func TestBandwidthLimit(t *testing.T) {
	const rate = 512 << 10 // bytes per second, per direction
	w := newWorld(t, worldOpts{bps: rate})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))

	measure := func(t *testing.T, url string) {
		c := w.client(srcSB1, w.internetPool)
		c.Timeout = 0
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		start := time.Now()
		var n int64
		buf := make([]byte, 32<<10)
		for time.Since(start) < 1500*time.Millisecond {
			m, err := resp.Body.Read(buf)
			n += int64(m)
			if err != nil {
				t.Fatal(err)
			}
		}
		el := time.Since(start).Seconds()
		got := float64(n) / el
		t.Logf("%s: %d bytes in %.2fs = %.0f B/s (limit %d)", url, n, el, got, rate)
		if got > 2*rate {
			t.Errorf("%.0f B/s is more than twice the limit %d", got, rate)
		}
		if got < rate/4 {
			t.Errorf("%.0f B/s is far below the limit %d", got, rate)
		}
	}
	t.Run("https", func(t *testing.T) { measure(t, "https://api.example.com/endless") })
	t.Run("http", func(t *testing.T) { measure(t, "http://api.example.com/endless") })
	t.Run("upload", func(t *testing.T) {
		c := w.client(srcSB1, w.internetPool)
		start := time.Now()
		body := io.LimitReader(zeroReader{}, rate*3/2)
		resp, err := c.Post("http://api.example.com/upload", "application/octet-stream", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		el := time.Since(start).Seconds()
		got := float64(rate*3/2) / el
		t.Logf("upload: %.2fs = %.0f B/s (limit %d)", el, got, rate)
		if got > 2*rate {
			t.Errorf("upload %.0f B/s is more than twice the limit", got)
		}
	})
}

// When the upstream drops an idle keep-alive connection, the sandbox's
// connection is dropped too, so its client retries instead of seeing 502.
func TestUpstreamIdleClose(t *testing.T) {
	w := newWorld(t, worldOpts{})
	w.setSandbox(srcSB1, "sb1", allowlist("api.example.com"))
	c := w.client(srcSB1, w.internetPool)
	for i := range 3 {
		code, body, _, err := get(t, c, "http://api.example.com/")
		if err != nil || code != 200 {
			t.Fatalf("request %d: %d %q %v", i, code, body, err)
		}
		w.plainSrv.CloseClientConnections()
		time.Sleep(20 * time.Millisecond)
	}
}
