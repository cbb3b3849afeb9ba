package pool

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// Defaults of the pool's sizing policy (see Config).
const (
	// DefaultMax is the most idle sandboxes of the "base" template kept
	// ready when nothing is configured.
	DefaultMax = 8
	// DefaultMin is how many idle sandboxes are kept even without demand.
	DefaultMin = 1
	// DefaultIdleAfter is how long without a create a pool waits before
	// it shrinks back to its minimum.
	DefaultIdleAfter = 5 * time.Minute
	// DefaultMemoryFloor is the fraction of the host's MemTotal that must
	// be available (MemAvailable) for refills to go on.
	DefaultMemoryFloor = 0.25
	// demandWindow is the window over which creates are counted.
	demandWindow = time.Minute
)

// Limits bound one template's pool: Min idle sandboxes are kept always,
// up to Max while creates ask for them.
type Limits struct {
	Min, Max int
}

// Config is the pool's configuration. A Config with no templates (or
// only Max 0) is a disabled pool.
type Config struct {
	// Templates are the pooled templates and their limits.
	Templates map[string]Limits
	// IdleAfter is how long a pool holds its size after the last create
	// before it shrinks to Min (default DefaultIdleAfter).
	IdleAfter time.Duration
	// MemoryFloor pauses refills while the host's available memory is
	// below this fraction of its total (0: DefaultMemoryFloor; negative:
	// never paused).
	MemoryFloor float64
	// Memory reads the host's available and total memory in bytes
	// (default: /proc/meminfo).
	Memory func() (avail, total uint64, err error)
}

// Target is the number of idle sandboxes the pool of template aims for
// at now: the creates of the last minute, held until IdleAfter has passed
// without one, clamped to the template's limits.
func (p *Pool) Target(template string, now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.targetLocked(template, now)
}

func (p *Pool) targetLocked(template string, now time.Time) int {
	lim := p.sizes[template]
	d := p.demand[template]
	if d == nil || now.Sub(d.last) >= p.cfg.IdleAfter {
		return lim.Min
	}
	return max(lim.Min, min(lim.Max, d.peak))
}

// demand is one template's recent creates.
type demand struct {
	recent []time.Time // creates within demandWindow, oldest first (at most Max)
	peak   int         // the most recent creates counted since demand began
	last   time.Time
}

// Demand records a create asking for template (served from the pool or
// not), which grows the pool's target.
func (p *Pool) Demand(template string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lim, ok := p.sizes[template]
	if !ok {
		return
	}
	d := p.demand[template]
	if d == nil {
		d = &demand{}
		p.demand[template] = d
	}
	if now.Sub(d.last) >= p.cfg.IdleAfter {
		d.recent, d.peak = d.recent[:0], 0 // a new burst
	}
	i := 0
	for i < len(d.recent) && now.Sub(d.recent[i]) >= demandWindow {
		i++
	}
	d.recent = append(d.recent[i:], now)
	if len(d.recent) > lim.Max {
		d.recent = d.recent[len(d.recent)-lim.Max:]
	}
	grew := len(d.recent) > d.peak
	d.peak = max(d.peak, len(d.recent))
	d.last = now
	if grew {
		p.Wake()
	}
}

// Shrink removes, oldest first, the idle sandboxes beyond each template's
// target and returns them (template → ids); the caller owns and destroys
// them.
func (p *Pool) Shrink(now time.Time) map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out map[string][]string
	for t := range p.sizes {
		extra := len(p.idle[t]) - p.targetLocked(t, now)
		if extra <= 0 {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		for _, s := range p.idle[t][:extra] {
			out[t] = append(out[t], s.id)
		}
		p.idle[t] = slices.Clone(p.idle[t][extra:])
	}
	return out
}

// memoryLow reports whether the host's available memory is below the
// configured floor (an unreadable figure is not low).
func (p *Pool) memoryLow() bool {
	if p.cfg.MemoryFloor < 0 {
		return false
	}
	avail, total, err := p.cfg.Memory()
	if err != nil || total == 0 {
		return false
	}
	return float64(avail) < p.cfg.MemoryFloor*float64(total)
}

// HostMemory reads MemAvailable and MemTotal from /proc/meminfo, in bytes.
func HostMemory() (avail, total uint64, err error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		switch string(f[0]) {
		case "MemAvailable:":
			avail = v << 10
		case "MemTotal:":
			total = v << 10
		}
	}
	if total == 0 || avail == 0 {
		return 0, 0, fmt.Errorf("/proc/meminfo: no MemTotal or MemAvailable")
	}
	return avail, total, nil
}
