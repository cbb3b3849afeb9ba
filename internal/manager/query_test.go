package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/manager"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestSetTimeout: a running sandbox's lease moves; an ended one's cannot.
func TestSetTimeout(t *testing.T) {
	tm := newTestManager(t)
	rec := tm.create("alice", sandbox.CreateRequest{TimeoutSeconds: 60})
	before := time.Now()
	r, err := tm.m.SetTimeout(context.Background(), "alice", rec.ID, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if r.ExpiresAt.Before(before.Add(time.Hour)) {
		t.Errorf("expires %v, want at least an hour from %v", r.ExpiresAt, before)
	}
	for _, tc := range []struct {
		owner   string
		seconds int64
		want    error
	}{
		{"bob", 60, sandbox.ErrNotFound},
		{"alice", -1, sandbox.ErrInvalid},
		{"alice", int64(tm.cfg.MaxTimeout/time.Second) + 1, sandbox.ErrInvalid},
	} {
		if _, err := tm.m.SetTimeout(context.Background(), tc.owner, rec.ID, tc.seconds); !errors.Is(err, tc.want) {
			t.Errorf("SetTimeout(%s, %d): %v, want %v", tc.owner, tc.seconds, err, tc.want)
		}
	}
	if err := tm.m.Delete(context.Background(), "alice", rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tm.m.SetTimeout(context.Background(), "alice", rec.ID, 60); !errors.Is(err, sandbox.ErrConflict) {
		t.Errorf("SetTimeout of an ended sandbox: %v, want ErrConflict", err)
	}
}

// TestList: filters by owner, state and metadata, and pages with a cursor.
func TestList(t *testing.T) {
	tm := newTestManager(t)
	var ids []string
	for i := range 3 {
		md := map[string]string{"team": "a"}
		if i == 2 {
			md["team"] = "b"
		}
		ids = append(ids, tm.create("alice", sandbox.CreateRequest{Metadata: md}).ID)
	}
	tm.create("bob", sandbox.CreateRequest{})
	if err := tm.m.Delete(context.Background(), "alice", ids[0]); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    manager.Filter
		want []string
	}{
		{"default hides terminated", manager.Filter{}, ids[1:]},
		{"all", manager.Filter{State: "all"}, ids},
		{"terminated", manager.Filter{State: "terminated"}, ids[:1]},
		{"metadata", manager.Filter{State: "all", Metadata: map[string]string{"team": "a"}}, ids[:2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, next, err := tm.m.List(context.Background(), "alice", tc.f)
			if err != nil || next != "" {
				t.Fatalf("List: %v, next %q", err, next)
			}
			if got := idsOf(recs); !equalSet(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	var paged []string
	f := manager.Filter{State: "all", Limit: 2}
	for range 3 {
		recs, next, err := tm.m.List(context.Background(), "alice", f)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, idsOf(recs)...)
		if next == "" {
			break
		}
		f.Cursor = next
	}
	if !equalSet(paged, ids) || len(paged) != len(ids) {
		t.Errorf("pages gave %v, want each of %v once", paged, ids)
	}
	if _, _, err := tm.m.List(context.Background(), "alice", manager.Filter{Cursor: "garbage"}); !errors.Is(err, sandbox.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

// TestMetrics: a sample reports the backend's counters.
func TestMetrics(t *testing.T) {
	tm := newTestManager(t)
	rec := tm.create("alice", sandbox.CreateRequest{})
	st := sandbox.Stats{CPUSeconds: 12, MemoryBytes: 100 << 20, MemoryPeakBytes: 200 << 20, DiskBytes: 5 << 20, NetRxBytes: 7, NetTxBytes: 9, PIDs: 3}
	if err := tm.backend.Host().SetStats(rec.ID, st); err != nil {
		t.Fatal(err)
	}
	m, err := tm.m.Metrics(context.Background(), "alice", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUSeconds != 12 || m.MemoryBytes != st.MemoryBytes || m.MemoryPeakBytes != st.MemoryPeakBytes ||
		m.DiskBytes != st.DiskBytes || m.NetRxBytes != 7 || m.NetTxBytes != 9 || m.PIDs != 3 || m.CostMicros <= 0 {
		t.Errorf("metrics %+v from stats %+v", m, st)
	}
	if _, err := tm.m.Metrics(context.Background(), "bob", rec.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another owner's metrics: %v, want ErrNotFound", err)
	}
}
