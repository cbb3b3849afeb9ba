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

// metered reports whether r accrues usage: it is running, paused, or
// stopped with its files kept.
func metered(r *store.Record) bool {
	return r.State == sandbox.Running || r.State == sandbox.Paused || r.State == sandbox.Stopped && r.StoppedAt != nil
}

// usageCheckpoint is how old a sandbox's stored usage may grow while its
// counters stand still. Running time, memory and stored disk accrue
// linearly from the stored sample time, so a checkpoint loses nothing
// (readers accrue up to now, and a restart accrues from the stored
// time): an idle sandbox's record is written once per checkpoint, not
// at every metering pass.
const usageCheckpoint = 5 * time.Minute

// sample meters every kept sandbox: each pass adds a point to its
// history and stops those that crossed their cost limit, and the usage
// of those whose CPU time or memory peak moved (or whose checkpoint is
// due) is stored, in one transaction.
func (m *Manager) sample(ctx context.Context) {
	recs, err := m.store.All()
	if err != nil {
		return
	}
	now := time.Now().UTC()
	m.hist.keep(keptIDs(recs))
	read := m.meterPass(ctx, recs, now) // metering_quiet.go
	stats := map[string]sandbox.Stats{}
	var ids, over []string
	for _, r := range recs {
		if !metered(r) {
			continue
		}
		st := read[r.ID]
		u := r.Usage
		accrue(&u, r, st, now, m.cfg.Prices)
		m.hist.add(r.ID, now, u, st)
		if r.MaxCostMicros > 0 && u.CostMicros >= r.MaxCostMicros {
			over = append(over, r.ID)
		}
		if u.CPUSeconds != r.Usage.CPUSeconds || u.MemoryPeakBytes != r.Usage.MemoryPeakBytes ||
			r.Usage.SampledAt.IsZero() || now.Sub(r.Usage.SampledAt) >= usageCheckpoint {
			ids = append(ids, r.ID)
			stats[r.ID] = st
		}
	}
	err = m.store.UpdateMany(ids, func(r *store.Record) error {
		if r.State.Kept() {
			accrue(&r.Usage, r, stats[r.ID], now, m.cfg.Prices)
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
	now := time.Now().UTC()
	for _, r := range recs {
		if r.Owner != owner || !r.CreatedAt.Before(to) || (r.EndedAt != nil && r.EndedAt.Before(from)) {
			continue
		}
		u := r.Usage
		if metered(r) { // stored usage is a checkpoint: accrue up to now
			accrue(&u, r, sandbox.Stats{}, now, m.cfg.Prices)
		}
		out.Sandboxes++
		out.CPUSeconds += u.CPUSeconds
		out.RunningSeconds += u.RunningSeconds
		out.MemoryGiBSeconds += u.MemoryGiBSeconds
		out.CostMicros += u.CostMicros
	}
	return out, nil
}
