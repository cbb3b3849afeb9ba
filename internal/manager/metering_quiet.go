package manager

import (
	"context"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Quiet sandboxes. A metering pass (every LivenessInterval) reads every
// live sandbox's counters, which at thousands of idle sandboxes is most
// of what an idle daemon does. A sandbox is quiet when its last read
// found its CPU time within quietCPU of the read before and nothing has
// used it since (no API call or port request): nothing but the guest
// agent's runtime ticking over runs in it. A quiet sandbox is read again
// when it is used, after quietRead, or at once when the backend's total
// CPU time (sandbox.MeterTotal, one read) moved more than the sandboxes
// just read account for plus the quiet ones' ticking, which is how a
// background process waking in an unused sandbox shows. Usage is
// cumulative, so what a quiet sandbox did between reads is never lost:
// it is only seen (and its cost limit checked) later, by quietRead at
// most.

const (
	// quietRead is how often a quiet sandbox is read anyway.
	quietRead = time.Minute
	// quietCPU is how much CPU time (seconds) a sandbox may use between
	// two reads and still be quiet: an idle agent's Go runtime wakes
	// about once a minute, for about 0.2 ms.
	quietCPU = 0.002
	// quietSlack is how much CPU time the total may move in a pass beyond
	// what the sandboxes read account for (their reads are not all at
	// the instant of the total's), and quietTick how much more per quiet
	// sandbox and second (3 times what an idle agent was measured to use),
	// before the quiet ones are read too.
	quietSlack = 0.02
	quietTick  = 10e-6
)

// meterReads is what metering last read of each sandbox; only the
// reaper's goroutine uses it.
type meterReads struct {
	last    map[string]*meterRead
	total   float64   // the backend's total at the last pass (0: none)
	totalAt time.Time // when it was read
}

type meterRead struct {
	st    sandbox.Stats
	at    time.Time
	quiet bool
}

// meterPass returns the counters of every metered live sandbox of recs for
// this pass, reading those that are not quiet (or all of them when the
// total says a quiet one moved).
func (m *Manager) meterPass(ctx context.Context, recs []*store.Record, now time.Time) map[string]sandbox.Stats {
	meter, ok := m.backend.(sandbox.Meter)
	out := map[string]sandbox.Stats{}
	if !ok {
		return out
	}
	mr := &m.meterReads
	if mr.last == nil {
		mr.last = map[string]*meterRead{}
	}
	var moved float64
	var deferred []string
	seen := make(map[string]bool, len(recs))
	read := func(id string) {
		st, err := meter.Stats(ctx, id)
		if err != nil {
			return
		}
		prev := mr.last[id]
		quiet := prev != nil && st.CPUSeconds-prev.st.CPUSeconds < quietCPU
		if prev != nil {
			moved += max(0, st.CPUSeconds-prev.st.CPUSeconds)
		} else {
			moved += st.CPUSeconds
		}
		mr.last[id] = &meterRead{st: st, at: now, quiet: quiet}
		out[id] = st
	}
	for _, r := range recs {
		if r.State != sandbox.Running && r.State != sandbox.Paused {
			continue
		}
		seen[r.ID] = true
		if p := mr.last[r.ID]; p != nil && p.quiet && now.Sub(p.at) < quietRead && !m.usedSince(r.ID, p.at) {
			deferred = append(deferred, r.ID)
			continue
		}
		read(r.ID)
	}
	if len(deferred) > 0 {
		if m.quietMoved(ctx, moved, len(deferred), now) {
			for _, id := range deferred {
				read(id)
			}
		} else {
			for _, id := range deferred {
				out[id] = mr.last[id].st
			}
		}
	} else {
		m.quietMoved(ctx, moved, 0, now) // keep the total current
	}
	for id := range mr.last {
		if !seen[id] {
			delete(mr.last, id)
		}
	}
	return out
}

// quietMoved reads the backend's total CPU time and reports whether it
// moved more than moved (what the sandboxes read this pass account for)
// and the ticking of quiet sandboxes since the last pass; without a
// total it reports true (read them all).
func (m *Manager) quietMoved(ctx context.Context, moved float64, quiet int, now time.Time) bool {
	mt, ok := m.backend.(sandbox.MeterTotal)
	if !ok {
		return true
	}
	mr := &m.meterReads
	total, err := mt.TotalCPUSeconds(ctx)
	if err != nil {
		mr.total = 0
		return true
	}
	prev, prevAt := mr.total, mr.totalAt
	mr.total, mr.totalAt = total, now
	slack := quietSlack + float64(quiet)*quietTick*now.Sub(prevAt).Seconds()
	return prev == 0 || total-prev-moved > slack
}

// usedSince reports whether sandbox id had an API call or port request
// after t, or has one in flight.
func (m *Manager) usedSince(id string, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.act[id]
	return a != nil && (a.last.After(t) || a.inflight > 0)
}
