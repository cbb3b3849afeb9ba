package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/paddock-sandbox/paddock/internal/manager"
)

// Retention is how long paused and stopped sandboxes are kept: the
// default when a pause or stop asks for no keep_for, and the most one may
// ask for (each at most 365 days). Seconds; 0 takes the default.
type Retention struct {
	PauseSeconds    int64 `json:"pause_retention_seconds,omitempty"`
	MaxPauseSeconds int64 `json:"max_pause_retention_seconds,omitempty"`
	StopSeconds     int64 `json:"stop_retention_seconds,omitempty"`
	MaxStopSeconds  int64 `json:"max_stop_retention_seconds,omitempty"`
}

// retentionFlags are the serve flags of Retention.
type retentionFlags struct{ pause, maxPause, stop, maxStop *int64 }

func addRetentionFlags(fs *flag.FlagSet) retentionFlags {
	d := manager.DefaultConfig()
	sec := func(t time.Duration) int64 { return int64(t / time.Second) }
	return retentionFlags{
		pause:    fs.Int64("pause-retention", sec(d.PauseRetention), "seconds a paused sandbox is kept when the pause names no keep_for_seconds"),
		maxPause: fs.Int64("max-pause-retention", sec(d.MaxPauseRetention), "most seconds a pause may ask to be kept (keep_for_seconds; at most 31536000, 365 days)"),
		stop:     fs.Int64("stop-retention", sec(d.StopRetention), "seconds a stopped sandbox's files are kept when the stop names no keep_for_seconds (also at lease end and idle)"),
		maxStop:  fs.Int64("max-stop-retention", sec(d.MaxStopRetention), "most seconds a stop may ask to keep files (keep_for_seconds; at most 31536000, 365 days)"),
	}
}

// apply merges the flags given on the command line into r.
func (f retentionFlags) apply(r *Retention, set map[string]bool) {
	for _, p := range []struct {
		name string
		flag *int64
		dst  *int64
	}{
		{"pause-retention", f.pause, &r.PauseSeconds}, {"max-pause-retention", f.maxPause, &r.MaxPauseSeconds},
		{"stop-retention", f.stop, &r.StopSeconds}, {"max-stop-retention", f.maxStop, &r.MaxStopSeconds},
	} {
		if set[p.name] {
			*p.dst = *p.flag
		}
	}
}

// applyRetention sets the manager's retention from r and checks bounds.
func applyRetention(mcfg *manager.Config, r Retention) error {
	for _, p := range []struct {
		name string
		sec  int64
		dst  *time.Duration
	}{
		{"pause_retention_seconds", r.PauseSeconds, &mcfg.PauseRetention},
		{"max_pause_retention_seconds", r.MaxPauseSeconds, &mcfg.MaxPauseRetention},
		{"stop_retention_seconds", r.StopSeconds, &mcfg.StopRetention},
		{"max_stop_retention_seconds", r.MaxStopSeconds, &mcfg.MaxStopRetention},
	} {
		if p.sec < 0 || time.Duration(p.sec)*time.Second > manager.MaxRetention {
			return fmt.Errorf("%s must be between 1 and %d", p.name, int64(manager.MaxRetention/time.Second))
		}
		if p.sec > 0 {
			*p.dst = time.Duration(p.sec) * time.Second
		}
	}
	if mcfg.PauseRetention > mcfg.MaxPauseRetention {
		return fmt.Errorf("pause retention %s exceeds the maximum %s", mcfg.PauseRetention, mcfg.MaxPauseRetention)
	}
	if mcfg.StopRetention > mcfg.MaxStopRetention {
		return fmt.Errorf("stop retention %s exceeds the maximum %s", mcfg.StopRetention, mcfg.MaxStopRetention)
	}
	return nil
}
