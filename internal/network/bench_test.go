package network

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkOffline measures what a daemon with networking adds to every
// sandbox, offline ones included: Setup with mode off (a pinned
// namespace with lo up) and Teardown; and the switches of a running
// sandbox: Update off → full (lease, rules, veth) and full → off (veth,
// rules, lease and sockets gone).
func BenchmarkOffline(b *testing.B) {
	skipUnlessRoot(b)
	tm := newTestManager(b, "10.250.30.0/24")
	var setup, on, off, teardown []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("bench%d", i)
		t0 := time.Now()
		if _, err := tm.Setup(b.Context(), id, Policy{Mode: ModeOff}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := tm.Update(b.Context(), id, Policy{Mode: ModeFull}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := tm.Update(b.Context(), id, Policy{Mode: ModeOff}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if err := tm.Teardown(b.Context(), id); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		setup, on, off, teardown = append(setup, t1.Sub(t0)), append(on, t2.Sub(t1)), append(off, t3.Sub(t2)), append(teardown, t4.Sub(t3))
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{{"setup-off", setup}, {"update-off-to-full", on}, {"update-full-to-off", off}, {"teardown-offline", teardown}} {
		b.ReportMetric(float64(median(r.d).Microseconds())/1000, r.name+"-median-ms")
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
