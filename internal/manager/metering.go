package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Prices is the price table used for cost accounting, in micro-units of
// currency (1 = one millionth).
type Prices struct {
	// CPUPerVCPUHour is charged per hour of CPU time used, but at least
	// CPUFloor × vcpus × running time (so an idle sandbox still costs).
	CPUPerVCPUHour float64 `json:"cpu_per_vcpu_hour_micros"`
	CPUFloor       float64 `json:"cpu_floor"`
	// MemoryPerGiBHour is charged per GiB of memory limit per running hour.
	MemoryPerGiBHour float64 `json:"memory_per_gib_hour_micros"`
	// StoragePerGiBHour is charged per GiB of disk limit (disk_mib) per
	// hour while a sandbox is stopped with its files kept; it is all a
	// stopped sandbox costs.
	StoragePerGiBHour float64 `json:"storage_per_gib_hour_micros"`
}

// DefaultPrices is the documented default price table.
func DefaultPrices() Prices {
	return Prices{CPUPerVCPUHour: 50000, CPUFloor: 0.1, MemoryPerGiBHour: 5000, StoragePerGiBHour: 100}
}

// cost prices a usage of a sandbox with resources res.
func (p Prices) cost(u store.Usage, res sandbox.Resources) int64 {
	cpu := max(u.CPUSeconds, p.CPUFloor*res.VCPUs*u.RunningSeconds)
	return int64(cpu/3600*p.CPUPerVCPUHour + u.MemoryGiBSeconds/3600*p.MemoryPerGiBHour +
		u.StoredGiBSeconds/3600*p.StoragePerGiBHour)
}

// leaseCost is the least a sandbox costs over a lease of d.
func (p Prices) leaseCost(res sandbox.Resources, d time.Duration) int64 {
	s := d.Seconds()
	return p.cost(store.Usage{RunningSeconds: s, MemoryGiBSeconds: float64(res.MemoryMiB) / 1024 * s}, res)
}

// accrue adds the time since the last sample to u (running time while
// running, stored disk while stopped; a paused sandbox accrues nothing)
// and records the backend's cumulative counters.
func accrue(u *store.Usage, r *store.Record, st sandbox.Stats, now time.Time, prices Prices) {
	if dt := now.Sub(u.SampledAt).Seconds(); !u.SampledAt.IsZero() && dt > 0 {
		switch r.State {
		case sandbox.Running:
			u.RunningSeconds += dt
			u.MemoryGiBSeconds += float64(r.Resources.MemoryMiB) / 1024 * dt
		case sandbox.Stopped:
			u.StoredGiBSeconds += float64(r.Resources.DiskMiB) / 1024 * dt
		}
	}
	u.CPUSeconds = max(u.CPUSeconds, st.CPUSeconds)
	u.MemoryPeakBytes = max(u.MemoryPeakBytes, st.MemoryPeakBytes)
	u.SampledAt = now
	u.CostMicros = prices.cost(*u, r.Resources)
}

// sample updates the usage of every live sandbox in one transaction and
// stops those that crossed their cost limit.
func (m *Manager) sample(ctx context.Context) {
	meter, ok := m.backend.(sandbox.Meter)
	recs, err := m.store.All()
	if err != nil {
		return
	}
	stats := map[string]sandbox.Stats{}
	var ids []string
	for _, r := range recs {
		if r.State == sandbox.Stopped && r.StoppedAt != nil {
			ids = append(ids, r.ID) // storage accrues
		}
		if r.State == sandbox.Running || r.State == sandbox.Paused {
			ids = append(ids, r.ID)
			if ok {
				if st, err := meter.Stats(ctx, r.ID); err == nil {
					stats[r.ID] = st
				}
			}
		}
	}
	now := time.Now().UTC()
	m.hist.keep(keptIDs(recs))
	var over []string
	err = m.store.UpdateMany(ids, func(r *store.Record) error {
		if !r.State.Kept() {
			return nil
		}
		accrue(&r.Usage, r, stats[r.ID], now, m.cfg.Prices)
		m.hist.add(r.ID, now, r.Usage, stats[r.ID])
		if r.MaxCostMicros > 0 && r.Usage.CostMicros >= r.MaxCostMicros {
			over = append(over, r.ID)
		}
		return nil
	})
	if err != nil {
		m.log.Error("metering: persist", "err", err)
	}
	for _, id := range over {
		if err := m.terminate(ctx, id, sandbox.Terminated, "cost limit reached"); err != nil {
			m.log.Error("metering: stop", "sandbox", id, "err", err)
		}
	}
}

// Metrics samples owner's sandbox id now and returns its accounting.
func (m *Manager) Metrics(ctx context.Context, owner, id string) (*sandbox.Metrics, error) {
	r, err := m.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	var st sandbox.Stats
	if meter, ok := m.backend.(sandbox.Meter); ok && r.State.Live() {
		st, _ = meter.Stats(ctx, id)
	}
	u := r.Usage
	now := time.Now().UTC()
	if r.State.Kept() {
		accrue(&u, r, st, now, m.cfg.Prices)
	}
	return &sandbox.Metrics{
		SandboxID: id, State: r.State, SampledAt: u.SampledAt,
		CPUSeconds: u.CPUSeconds, RunningSeconds: u.RunningSeconds,
		MemoryBytes: st.MemoryBytes, MemoryPeakBytes: max(u.MemoryPeakBytes, st.MemoryPeakBytes),
		MemoryGiBSeconds: u.MemoryGiBSeconds, DiskBytes: st.DiskBytes,
		NetRxBytes: st.NetRxBytes, NetTxBytes: st.NetTxBytes, PIDs: st.PIDs,
		CostMicros: u.CostMicros,
	}, nil
}

// Usage sums owner's consumption by sandboxes alive at some point in
// [from, to). Records of ended sandboxes are kept for RetainEnded, so the
// window reaches back that far.
func (m *Manager) Usage(ctx context.Context, owner string, from, to time.Time) (*sandbox.Usage, error) {
	if !from.Before(to) {
		return nil, fmt.Errorf("%w: from must be before to", sandbox.ErrInvalid)
	}
	recs, err := m.store.All()
	if err != nil {
		return nil, err
	}
	out := &sandbox.Usage{Owner: owner, From: from, To: to}
	for _, r := range recs {
		if r.Owner != owner || !r.CreatedAt.Before(to) || (r.EndedAt != nil && r.EndedAt.Before(from)) {
			continue
		}
		out.Sandboxes++
		out.CPUSeconds += r.Usage.CPUSeconds
		out.RunningSeconds += r.Usage.RunningSeconds
		out.MemoryGiBSeconds += r.Usage.MemoryGiBSeconds
		out.CostMicros += r.Usage.CostMicros
	}
	return out, nil
}
