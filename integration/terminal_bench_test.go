package integration

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// BenchmarkTerminal measures, interleaved in one run in one sandbox:
//
//	(a) open a terminal running sh → its first prompt → close
//	(b) a keystroke's round trip through an open terminal (the tty echoes it)
//	(c) baseline: exec `true` through the REST API
//	(d) exec `touch F` until F's create event arrived on an open watch
//	(e) baseline: exec `touch F` alone
//
// Run with `make bench`.
func BenchmarkTerminal(b *testing.B) {
	requireDaemon(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sb, err := shared.client(0).Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.Exec(ctx, api.ExecRequest{Command: "mkdir -p bw"}); err != nil {
		b.Fatal(err)
	}
	echo, err := sb.OpenPTY(ctx, client.PTYOptions{Argv: []string{"cat"}})
	if err != nil {
		b.Fatal(err)
	}
	defer echo.Close()
	w, err := sb.Watch(ctx, "bw", false)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	buf := make([]byte, 4096)
	var ta, tb, tc, td, te []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		t, err := sb.OpenPTY(ctx, client.PTYOptions{Argv: []string{"sh"}, Env: map[string]string{"PS1": "$ "}})
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		for !bytes.Contains(out.Bytes(), []byte("$ ")) {
			n, err := t.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			out.Write(buf[:n])
		}
		t.Close()
		ta = append(ta, time.Since(start))

		start = time.Now()
		if _, err := echo.Write([]byte("x")); err != nil {
			b.Fatal(err)
		}
		if n, err := echo.Read(buf); err != nil || n == 0 {
			b.Fatalf("echo: %d %v", n, err)
		}
		tb = append(tb, time.Since(start))

		start = time.Now()
		if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		tc = append(tc, time.Since(start))

		name := "bw/f" + strconv.Itoa(i)
		start = time.Now()
		if _, err := sb.Exec(ctx, api.ExecRequest{Argv: []string{"touch", name}}); err != nil {
			b.Fatal(err)
		}
		te = append(te, time.Since(start))
		for {
			ev, err := w.Next()
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == api.WatchCreate && ev.Path == "/workspace/"+name {
				break
			}
		}
		td = append(td, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	fmt.Printf("\nruntime %s, %d iterations\n", runtimeName(), b.N)
	fmt.Printf("%-52s %10s %10s\n", "measure", "median", "p99")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"(a) open terminal (sh) → first prompt → close", ta},
		{"(b) keystroke round trip through a terminal", tb},
		{"(c) baseline: exec true", tc},
		{"(d) exec touch F → F's create event received", td},
		{"(e) baseline: exec touch F", te},
	} {
		fmt.Printf("%-52s %10.1f %10.1f ms\n", r.name, ms(pct(r.d, 50)), ms(pct(r.d, 99)))
	}
}
