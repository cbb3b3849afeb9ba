package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/pool"
)

// WarmPoolConfig is the config's warm_pool section: per template, the
// most idle sandboxes kept ready (a number, the older format, or
// {"max": n, "min": m}), and the policy under the reserved keys "min"
// (idle sandboxes kept without demand, default 1), "idle_after" (a
// duration after which a pool without creates shrinks to its min,
// default "5m") and "memory" (refills pause while the host's available
// memory is below this share of its total, default "25%"; "0%" never
// pauses). With no template named, the "base" template is pooled with a
// max of 8.
//
//	"warm_pool": {"base": 8, "python": {"min": 0, "max": 4}, "idle_after": "10m", "memory": "25%"}
type WarmPoolConfig struct {
	Templates map[string]pool.Limits
	// Min, IdleAfter and Memory are the policy; nil/"" take the defaults.
	Min       *int
	IdleAfter string
	Memory    string
}

// UnmarshalJSON reads the section, template entries and policy keys.
func (w *WarmPoolConfig) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*w = WarmPoolConfig{}
	for k, v := range raw {
		var err error
		switch k {
		case "min":
			w.Min = new(int)
			err = json.Unmarshal(v, w.Min)
		case "idle_after":
			err = json.Unmarshal(v, &w.IdleAfter)
		case "memory":
			err = json.Unmarshal(v, &w.Memory)
		default:
			var l struct {
				Min *int `json:"min"`
				Max int  `json:"max"`
			}
			var n int
			if err = json.Unmarshal(v, &n); err == nil {
				l.Max = n
			} else {
				dec := json.NewDecoder(strings.NewReader(string(v)))
				dec.DisallowUnknownFields()
				err = dec.Decode(&l)
			}
			if err == nil {
				if w.Templates == nil {
					w.Templates = map[string]pool.Limits{}
				}
				lim := pool.Limits{Min: -1, Max: l.Max}
				if l.Min != nil {
					lim.Min = *l.Min
				}
				w.Templates[k] = lim // Min -1: the section's min
			}
		}
		if err != nil {
			return fmt.Errorf("warm_pool.%s: %w", k, err)
		}
	}
	return nil
}

// MarshalJSON writes the section in the form UnmarshalJSON reads.
func (w WarmPoolConfig) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for t, l := range w.Templates {
		if l.Min < 0 {
			out[t] = l.Max
		} else {
			out[t] = map[string]int{"min": l.Min, "max": l.Max}
		}
	}
	if w.Min != nil {
		out["min"] = *w.Min
	}
	if w.IdleAfter != "" {
		out["idle_after"] = w.IdleAfter
	}
	if w.Memory != "" {
		out["memory"] = w.Memory
	}
	return json.Marshal(out)
}

// warmPoolFlags are the serve flags of the warm pool.
type warmPoolFlags struct {
	max, min  *int
	idleAfter *time.Duration
	memory    *string
}

func addWarmPoolFlags(fs *flag.FlagSet) warmPoolFlags {
	return warmPoolFlags{
		max:       fs.Int("warm-pool", pool.DefaultMax, `most idle sandboxes of the "base" template kept ready for creates; the pool grows to it with recent creates and shrinks back to --warm-pool-min (each idle sandbox costs about 3 MiB of host memory); 0 turns the warm pool off for every template (overrides the config's warm_pool.base)`),
		min:       fs.Int("warm-pool-min", pool.DefaultMin, "idle sandboxes a pooled template keeps ready even without creates (at most its max)"),
		idleAfter: fs.Duration("warm-pool-idle-after", pool.DefaultIdleAfter, "shrink a pool back to --warm-pool-min after this long without a create"),
		memory:    fs.String("warm-pool-memory", "25%", "pause refilling the pool while the host's available memory is below this share of its total (0% = never pause)"),
	}
}

// apply merges the flags given on the command line into w.
func (f warmPoolFlags) apply(w *WarmPoolConfig, set map[string]bool) {
	if set["warm-pool"] {
		if *f.max == 0 {
			w.Templates = map[string]pool.Limits{} // off
			w.Templates["base"] = pool.Limits{}
		} else {
			if w.Templates == nil {
				w.Templates = map[string]pool.Limits{}
			}
			lim, ok := w.Templates["base"]
			if !ok {
				lim.Min = -1
			}
			lim.Max = *f.max
			w.Templates["base"] = lim
		}
	}
	if set["warm-pool-min"] {
		w.Min = f.min
	}
	if set["warm-pool-idle-after"] {
		w.IdleAfter = f.idleAfter.String()
	}
	if set["warm-pool-memory"] {
		w.Memory = *f.memory
	}
}

// poolConfig checks w and returns the pool's configuration; it warns about
// pools the daemon cannot fill (unknown templates, more than
// --max-sandboxes).
func (w WarmPoolConfig) poolConfig(templates []string, maxSandboxes int, log *slog.Logger) (pool.Config, error) {
	cfg := pool.Config{Templates: map[string]pool.Limits{}, IdleAfter: pool.DefaultIdleAfter, MemoryFloor: pool.DefaultMemoryFloor}
	minIdle := pool.DefaultMin
	if w.Min != nil {
		if *w.Min < 0 {
			return cfg, fmt.Errorf("warm_pool.min must not be negative")
		}
		minIdle = *w.Min
	}
	if w.IdleAfter != "" {
		d, err := time.ParseDuration(w.IdleAfter)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("warm_pool.idle_after: %q is not a positive duration", w.IdleAfter)
		}
		cfg.IdleAfter = d
	}
	if w.Memory != "" {
		pct, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(w.Memory), "%"), 64)
		if err != nil || !strings.HasSuffix(w.Memory, "%") || pct < 0 || pct > 90 {
			return cfg, fmt.Errorf("warm_pool.memory: %q is not a percentage between 0%% and 90%%", w.Memory)
		}
		cfg.MemoryFloor = pct / 100
		if pct == 0 {
			cfg.MemoryFloor = -1 // never paused
		}
	}
	tpls := w.Templates
	if tpls == nil {
		tpls = map[string]pool.Limits{"base": {Min: -1, Max: pool.DefaultMax}}
	}
	total := 0
	for t, l := range tpls {
		if l.Max < 0 || l.Max > maxPoolPerTemplate {
			return cfg, fmt.Errorf("warm_pool: %q: max must be between 0 and %d", t, maxPoolPerTemplate)
		}
		if l.Max == 0 {
			continue
		}
		if l.Min < 0 {
			l.Min = minIdle
		}
		l.Min = min(l.Min, l.Max)
		cfg.Templates[t] = l
		if !slices.Contains(templates, t) {
			log.Warn("warm_pool names a template that does not exist (yet); it is filled once it does", "template", t)
		}
		total += l.Max
	}
	if total > maxSandboxes {
		log.Warn("warm pools together may exceed --max-sandboxes; they are filled as far as it allows (a create on a full host takes an idle sandbox's slot)", "pools", total, "max_sandboxes", maxSandboxes)
	}
	return cfg, nil
}

// maxPoolPerTemplate bounds one template's pool.
const maxPoolPerTemplate = 1000
