package container

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestStatsCache: a sample is handed back only at the same CPU counter and
// while younger than statsMaxAge; a zero counter (unreadable) never
// matches; forget drops it.
func TestStatsCache(t *testing.T) {
	var c statsCache
	t0 := time.Now()
	st := sandbox.Stats{CPUSeconds: 1.5, MemoryBytes: 42}
	if _, ok := c.get("a", 7, t0); ok {
		t.Fatal("hit on an empty cache")
	}
	c.put("a", 7, st, t0)
	for _, tc := range []struct {
		cpu  int64
		at   time.Duration
		want bool
	}{
		{7, 0, true},
		{7, statsMaxAge - time.Second, true},
		{7, statsMaxAge, false},
		{8, time.Second, false},
		{0, time.Second, false},
	} {
		got, ok := c.get("a", tc.cpu, t0.Add(tc.at))
		if ok != tc.want || (ok && got != st) {
			t.Errorf("get(cpu %d, +%v) = %+v, %v; want hit %v", tc.cpu, tc.at, got, ok, tc.want)
		}
	}
	c.forget("a")
	if _, ok := c.get("a", 7, t0); ok {
		t.Error("hit after forget")
	}
}

// TestReadSmall reads files of several sizes whole and reports a missing
// one as fs.ErrNotExist.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 511, 512, 513, 5000} {
		want := bytes.Repeat([]byte("x"), n)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readSmall(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read %d, %v", n, len(got), err)
		}
	}
	if _, err := readSmall(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if got, err := readSmall("/proc/self/net/dev"); err != nil || !bytes.Contains(got, []byte("lo:")) {
		t.Errorf("/proc/self/net/dev: %q %v", got, err)
	}
}
