package manager

// The per-sandbox metrics history: what the reaper's metering pass
// (sample, every LivenessInterval) saw of each kept sandbox, in a ring
// buffer of HistorySamples per sandbox, in memory only (a restart starts
// it afresh). Sandboxes whose records are pruned lose theirs at the next
// pass, so the whole history is bounded by HistorySamples × kept records.

import (
	"context"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// HistorySamples is how many samples of one sandbox the history keeps:
// 30 minutes at the default 5-second metering interval (about 26 KiB per
// sandbox).
const HistorySamples = 360

// MetricsSample is one point of a sandbox's metrics history: the
// cumulative counters and the gauges at one metering pass.
type MetricsSample struct {
	At         time.Time
	CPUSeconds float64
	// MemoryBytes, NetRxBytes, NetTxBytes and PIDs are what the backend
	// read (zero while the sandbox is stopped).
	MemoryBytes            int64
	NetRxBytes, NetTxBytes int64
	PIDs                   int64
	CostMicros             int64
}

// ring is one sandbox's samples, oldest first once full.
type ring struct {
	buf  []MetricsSample
	next int
	full bool
}

func (r *ring) add(s MetricsSample) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.full = true
}

// samples returns a copy, oldest first.
func (r *ring) samples() []MetricsSample {
	out := make([]MetricsSample, 0, len(r.buf))
	if r.full {
		out = append(out, r.buf[r.next:]...)
		return append(out, r.buf[:r.next]...)
	}
	return append(out, r.buf...)
}

// history holds the rings of every kept sandbox.
type history struct {
	size  int
	mu    sync.Mutex
	rings map[string]*ring
}

func newHistory(size int) *history {
	return &history{size: size, rings: map[string]*ring{}}
}

// add appends a sample of sandbox id taken at now from its usage u and
// the backend's stats st.
func (h *history) add(id string, now time.Time, u store.Usage, st sandbox.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rings[id]
	if r == nil {
		r = &ring{buf: make([]MetricsSample, 0, h.size)}
		h.rings[id] = r
	}
	r.add(MetricsSample{At: now, CPUSeconds: u.CPUSeconds, MemoryBytes: st.MemoryBytes,
		NetRxBytes: st.NetRxBytes, NetTxBytes: st.NetTxBytes, PIDs: st.PIDs, CostMicros: u.CostMicros})
}

// keep drops the rings of sandboxes not in kept.
func (h *history) keep(kept map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.rings {
		if !kept[id] {
			delete(h.rings, id)
		}
	}
}

func (h *history) get(id string) []MetricsSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rings[id]; r != nil {
		return r.samples()
	}
	return []MetricsSample{}
}

// MetricsHistory returns owner's sandbox id's metrics history, oldest
// first (at most HistorySamples, one per metering pass while the sandbox
// was running, paused or stopped).
func (m *Manager) MetricsHistory(ctx context.Context, owner, id string) ([]MetricsSample, error) {
	if _, err := m.Get(ctx, owner, id); err != nil {
		return nil, err
	}
	return m.hist.get(id), nil
}

// keptIDs is the set of recs' ids.
func keptIDs(recs []*store.Record) map[string]bool {
	ids := make(map[string]bool, len(recs))
	for _, r := range recs {
		ids[r.ID] = true
	}
	return ids
}
