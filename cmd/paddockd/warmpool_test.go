package main

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/pool"
)

// TestWarmPoolConfig: the config section (old and new forms) and the
// flags give the pool's configuration.
func TestWarmPoolConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name   string
		config string
		args   []string
		want   map[string]pool.Limits
		idle   time.Duration
		floor  float64
		err    bool
	}{
		{name: "default", want: map[string]pool.Limits{"base": {Min: 1, Max: 8}}, idle: 5 * time.Minute, floor: 0.25},
		{name: "off", args: []string{"--warm-pool", "0"}, config: `{"warm_pool": {"py": 3}}`, want: map[string]pool.Limits{}, idle: 5 * time.Minute, floor: 0.25},
		{name: "old map format", config: `{"warm_pool": {"base": 2, "py": 0}}`, want: map[string]pool.Limits{"base": {Min: 1, Max: 2}}, idle: 5 * time.Minute, floor: 0.25},
		{name: "policy keys", config: `{"warm_pool": {"base": 4, "py": {"min": 0, "max": 3}, "min": 2, "idle_after": "10m", "memory": "40%"}}`,
			want: map[string]pool.Limits{"base": {Min: 2, Max: 4}, "py": {Min: 0, Max: 3}}, idle: 10 * time.Minute, floor: 0.4},
		{name: "flags over config", config: `{"warm_pool": {"base": 4, "py": 2}}`, args: []string{"--warm-pool", "6", "--warm-pool-min", "0", "--warm-pool-idle-after", "1m", "--warm-pool-memory", "0%"},
			want: map[string]pool.Limits{"base": {Min: 0, Max: 6}, "py": {Min: 0, Max: 2}}, idle: time.Minute, floor: -1},
		{name: "min above max", args: []string{"--warm-pool", "2", "--warm-pool-min", "5"}, want: map[string]pool.Limits{"base": {Min: 2, Max: 2}}, idle: 5 * time.Minute, floor: 0.25},
		{name: "negative", config: `{"warm_pool": {"base": -1}}`, err: true},
		{name: "bad memory", config: `{"warm_pool": {"memory": "25"}}`, err: true},
		{name: "bad duration", config: `{"warm_pool": {"idle_after": "soon"}}`, err: true},
		{name: "unknown field", config: `{"warm_pool": {"py": {"size": 2}}}`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.config != "" {
				if err := json.Unmarshal([]byte(tt.config), &cfg); err != nil {
					if tt.err {
						return
					}
					t.Fatal(err)
				}
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			f := addWarmPoolFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			set := map[string]bool{}
			fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
			f.apply(&cfg.WarmPool, set)
			pc, err := cfg.WarmPool.poolConfig([]string{"base", "py"}, 100, log)
			if tt.err {
				if err == nil {
					t.Fatalf("accepted: %+v", pc)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(pc.Templates, tt.want) || pc.IdleAfter != tt.idle || pc.MemoryFloor != tt.floor {
				t.Fatalf("got %+v %v", pc, err)
			}
			// The section round-trips.
			b, err := json.Marshal(cfg.WarmPool)
			var back WarmPoolConfig
			if err != nil || json.Unmarshal(b, &back) != nil || !reflect.DeepEqual(back.Templates, cfg.WarmPool.Templates) {
				t.Fatalf("round trip %s: %+v", b, back)
			}
		})
	}
}
