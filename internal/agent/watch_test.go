package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// watch opens a watch stream; it fails the test unless the agent answers 200.
func (h *harness) watch(ctx context.Context, path string, recursive bool) (*bufio.Scanner, func()) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://agent/files/watch?path="+url.QueryEscape(path)+"&recursive="+strconv.FormatBool(recursive), nil)
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		h.t.Fatalf("watch %s: %s", path, resp.Status)
	}
	return bufio.NewScanner(resp.Body), func() { resp.Body.Close() }
}

func nextEvent(t *testing.T, sc *bufio.Scanner) api.WatchEvent {
	t.Helper()
	if !sc.Scan() {
		t.Fatalf("stream ended: %v", sc.Err())
	}
	var ev api.WatchEvent
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		t.Fatalf("bad event %q: %v", sc.Bytes(), err)
	}
	return ev
}

func TestWatchEvents(t *testing.T) {
	h := newHarness(t, agent.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := filepath.Join(h.workdir, "w")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sc, stop := h.watch(ctx, "w", true)
	defer stop()

	steps := []struct {
		do   func() error
		want []api.WatchEvent
	}{
		{func() error { return os.WriteFile(filepath.Join(dir, "a"), nil, 0o644) },
			[]api.WatchEvent{{Type: api.WatchCreate, Path: filepath.Join(dir, "a")}}},
		{func() error { return os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644) },
			[]api.WatchEvent{{Type: api.WatchWrite, Path: filepath.Join(dir, "a")}}},
		{func() error { return os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")) },
			[]api.WatchEvent{{Type: api.WatchRename, Path: filepath.Join(dir, "b"), OldPath: filepath.Join(dir, "a")}}},
		{func() error { return os.Mkdir(filepath.Join(dir, "sub"), 0o755) },
			[]api.WatchEvent{{Type: api.WatchCreate, Path: filepath.Join(dir, "sub"), IsDir: true}}},
		{func() error { return os.WriteFile(filepath.Join(dir, "sub", "c"), nil, 0o644) },
			[]api.WatchEvent{{Type: api.WatchCreate, Path: filepath.Join(dir, "sub", "c")}}},
		{func() error { return os.Rename(filepath.Join(dir, "b"), filepath.Join(h.workdir, "out")) },
			[]api.WatchEvent{{Type: api.WatchRemove, Path: filepath.Join(dir, "b")}}},
		{func() error { return os.Remove(filepath.Join(dir, "sub", "c")) },
			[]api.WatchEvent{{Type: api.WatchRemove, Path: filepath.Join(dir, "sub", "c")}}},
	}
	var last api.WatchEvent
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatal(err)
		}
		for _, want := range st.want {
			got := nextEvent(t, sc)
			if got.Time == nil {
				t.Errorf("step %d: event without time", i)
			}
			got.Time = nil
			for got == last { // truncate and write: two writes
				got = nextEvent(t, sc)
				got.Time = nil
			}
			last = got
			if got != want {
				t.Fatalf("step %d: got %+v, want %+v", i, got, want)
			}
		}
	}
}

func TestWatchOverflowAndLimits(t *testing.T) {
	h := newHarness(t, agent.Config{MaxWatches: 2, MaxWatchDirs: 3, WatchQueue: 8})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := os.WriteFile(filepath.Join(h.workdir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"o", "deep/a/b/c"} {
		if err := os.MkdirAll(filepath.Join(h.workdir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, path string
		recursive  bool
		status     int
	}{
		{"missing", "nothing-here", false, http.StatusNotFound},
		{"not a directory", "file", false, http.StatusBadRequest},
		{"too many directories", "deep", true, http.StatusTooManyRequests},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := h.try(http.MethodGet, "/files/watch?path="+tc.path+"&recursive="+strconv.FormatBool(tc.recursive), nil, nil)
			if st != tc.status {
				t.Fatalf("status %d, want %d", st, tc.status)
			}
		})
	}

	sc, stop := h.watch(ctx, "o", false)
	defer stop()
	// Not reading: 8 events queue, then overflow. The socket's own buffer
	// holds some too, so make many.
	for i := 0; i < 3000; i++ {
		if err := os.WriteFile(filepath.Join(h.workdir, "o", strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	creates, overflows := 0, 0
	marker := filepath.Join(h.workdir, "o", "marker")
	for {
		ev := nextEvent(t, sc)
		if ev.Path == marker && ev.Type == api.WatchCreate {
			break
		}
		if ev.Type != api.WatchOverflow {
			creates++
			continue
		}
		overflows++ // reading now: a marker written after this one gets through
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(marker); err != nil {
			t.Fatal(err)
		}
	}
	if overflows == 0 || creates >= 3000 {
		t.Fatalf("%d creates, %d overflows: want an overflow and fewer events than changes", creates, overflows)
	}

	_, stop2 := h.watch(ctx, "o", false)
	defer stop2()
	if st, e := h.try(http.MethodGet, "/files/watch?path=o", nil, nil); st != http.StatusTooManyRequests {
		t.Fatalf("third watch: %d %v, want 429", st, e)
	}
}
