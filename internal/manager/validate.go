package manager

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// Limits on create requests besides resources.
const (
	maxEnvVars       = 256
	maxEnvBytes      = 64 << 10
	maxMetadataKeys  = 64
	maxMetadataKey   = 128
	maxMetadataValue = 1024
)

// validate turns a create request into a record with defaults applied.
func (m *Manager) validate(req sandbox.CreateRequest) (*store.Record, error) {
	tpl := req.Template
	if tpl == "" {
		tpl = "base"
	}
	if m.tpl == nil && !slices.Contains(m.backend.Templates(), tpl) { // else Create checks it per key
		return nil, fmt.Errorf("%w: %q (available: %s)", sandbox.ErrUnknownTemplate, tpl, strings.Join(m.backend.Templates(), ", "))
	}
	d, err := m.timeout(req.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	res, err := m.resources(req.Resources)
	if err != nil {
		return nil, err
	}
	if len(req.Env) > maxEnvVars {
		return nil, fmt.Errorf("%w: at most %d env vars", sandbox.ErrInvalid, maxEnvVars)
	}
	size := 0
	for k, v := range req.Env {
		if err := checkEnvName(k); err != nil {
			return nil, err
		}
		if strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: env %s: value contains a NUL byte", sandbox.ErrInvalid, k)
		}
		size += len(k) + len(v) + 2
	}
	if size > maxEnvBytes {
		return nil, fmt.Errorf("%w: env is %d bytes, at most %d", sandbox.ErrInvalid, size, maxEnvBytes)
	}
	if len(req.Metadata) > maxMetadataKeys {
		return nil, fmt.Errorf("%w: at most %d metadata keys", sandbox.ErrInvalid, maxMetadataKeys)
	}
	for k, v := range req.Metadata {
		if k == "" || len(k) > maxMetadataKey || len(v) > maxMetadataValue || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("%w: metadata keys must be 1-%d bytes and values at most %d bytes of UTF-8",
				sandbox.ErrInvalid, maxMetadataKey, maxMetadataValue)
		}
	}
	switch req.OnTimeout {
	case "":
		req.OnTimeout = sandbox.OnTimeoutKill
	case sandbox.OnTimeoutKill, sandbox.OnTimeoutPause, sandbox.OnTimeoutStop:
	default:
		return nil, fmt.Errorf("%w: on_timeout must be %q, %q or %q", sandbox.ErrInvalid, sandbox.OnTimeoutKill, sandbox.OnTimeoutPause, sandbox.OnTimeoutStop)
	}
	if req.MaxCostMicros < 0 {
		return nil, fmt.Errorf("%w: max_cost_micros must not be negative", sandbox.ErrInvalid)
	}
	if c := m.cfg.Prices.leaseCost(res, d); req.MaxCostMicros > 0 && c > req.MaxCostMicros {
		return nil, fmt.Errorf("%w: the first lease (%s with these resources) costs at least %d micros, more than max_cost_micros %d",
			sandbox.ErrInvalid, d, c, req.MaxCostMicros)
	}
	now := time.Now().UTC()
	return &store.Record{
		Template: tpl, CreatedAt: now, ExpiresAt: now.Add(d),
		Metadata: req.Metadata, Resources: res, Env: req.Env,
		TimeoutSeconds: int64(d / time.Second), OnTimeout: req.OnTimeout, MaxCostMicros: req.MaxCostMicros,
	}, nil
}

// checkEnvName accepts POSIX-ish names: no '=', no NUL, not empty.
func checkEnvName(k string) error {
	if k == "" || len(k) > 256 || strings.ContainsAny(k, "=\x00") || !utf8.ValidString(k) {
		return fmt.Errorf("%w: bad env var name %q", sandbox.ErrInvalid, k)
	}
	return nil
}

// timeout turns a lease length in seconds into a duration (0 = default).
func (m *Manager) timeout(seconds int64) (time.Duration, error) {
	if seconds == 0 {
		return m.cfg.DefaultTimeout, nil
	}
	if seconds < 0 || time.Duration(seconds)*time.Second > m.cfg.MaxTimeout {
		return 0, fmt.Errorf("%w: timeout_seconds must be between 1 and %d", sandbox.ErrInvalid, int64(m.cfg.MaxTimeout.Seconds()))
	}
	return time.Duration(seconds) * time.Second, nil
}

// resources applies defaults and checks bounds.
func (m *Manager) resources(r sandbox.Resources) (sandbox.Resources, error) {
	out := m.cfg.Defaults
	if r.VCPUs != 0 {
		out.VCPUs = r.VCPUs
	}
	if r.MemoryMiB != 0 {
		out.MemoryMiB = r.MemoryMiB
	}
	if r.DiskMiB != 0 {
		out.DiskMiB = r.DiskMiB
	}
	if r.PIDs != 0 {
		out.PIDs = r.PIDs
	}
	for _, c := range []struct {
		name      string
		v, lo, hi float64
	}{
		{"vcpus", out.VCPUs, 0.05, m.cfg.Max.VCPUs},
		{"memory_mib", float64(out.MemoryMiB), 32, float64(m.cfg.Max.MemoryMiB)},
		{"disk_mib", float64(out.DiskMiB), 64, float64(m.cfg.Max.DiskMiB)},
		{"pids", float64(out.PIDs), 16, float64(m.cfg.Max.PIDs)},
	} {
		if c.v < c.lo || c.v > c.hi {
			return out, fmt.Errorf("%w: resources.%s must be between %g and %g", sandbox.ErrInvalid, c.name, c.lo, c.hi)
		}
	}
	return out, nil
}
