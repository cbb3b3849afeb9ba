package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	bolt "go.etcd.io/bbolt"
)

const schemaVersion = "1"

var (
	bucketMeta      = []byte("meta")
	bucketSandboxes = []byte("sandboxes")
	bucketSecrets   = []byte("secrets")
)

// Record is the persisted state of one sandbox.
type Record struct {
	ID        string            `json:"id"`
	Owner     string            `json:"owner"`
	Template  string            `json:"template"`
	Runtime   string            `json:"runtime,omitempty"`
	State     sandbox.State     `json:"state"`
	CreatedAt time.Time         `json:"created_at"`
	ExpiresAt time.Time         `json:"expires_at"`
	EndedAt   *time.Time        `json:"ended_at,omitempty"`
	Reason    string            `json:"reason,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Resources sandbox.Resources `json:"resources"`
	Env       map[string]string `json:"env,omitempty"`
	// TimeoutSeconds is the lease length granted on create and resume.
	TimeoutSeconds int64      `json:"timeout_seconds,omitempty"`
	OnTimeout      string     `json:"on_timeout,omitempty"`
	MaxCostMicros  int64      `json:"max_cost_micros,omitempty"`
	PausedAt       *time.Time `json:"paused_at,omitempty"`
	// StoppedAt is set while the sandbox is stopped (files kept); its
	// ExpiresAt is then the end of its retention, as while paused.
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	// StopAt, while paused, is when the reaper stops it (pause, then stop).
	StopAt *time.Time `json:"stop_at,omitempty"`
	// Idle is the idle policy (see sandbox.IdlePolicy).
	Idle IdlePolicy `json:"idle,omitempty"`
	// History is the sandbox's lifecycle transitions, oldest first, the
	// last MaxHistory kept.
	History []Event `json:"history,omitempty"`
	Usage   Usage   `json:"usage"`
	// Network is the egress policy; Secrets the secret names bound to the
	// sandbox and Placeholders the value its env holds for each.
	Network      NetworkPolicy     `json:"network,omitempty"`
	Secrets      []string          `json:"secrets,omitempty"`
	Placeholders map[string]string `json:"placeholders,omitempty"`
}

// NetworkPolicy is a persisted egress policy (see api.NetworkPolicy).
type NetworkPolicy struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// IdlePolicy is a persisted sandbox.IdlePolicy.
type IdlePolicy struct {
	TimeoutSeconds int64  `json:"timeout_seconds,omitempty"`
	OnIdle         string `json:"on_idle,omitempty"`
	AutoResume     bool   `json:"auto_resume,omitempty"`
	CountProcesses bool   `json:"count_processes,omitempty"`
}

// Event is one lifecycle transition: the state entered, when, and why
// ("create", "pause", "idle", "auto_resume", "expired", ...).
type Event struct {
	At     time.Time     `json:"at"`
	State  sandbox.State `json:"state"`
	Reason string        `json:"reason,omitempty"`
}

// MaxHistory bounds Record.History.
const MaxHistory = 64

// AddEvent appends a transition to r's history, dropping the oldest past
// MaxHistory.
func (r *Record) AddEvent(at time.Time, state sandbox.State, reason string) {
	r.History = append(r.History, Event{At: at, State: state, Reason: reason})
	if n := len(r.History); n > MaxHistory {
		r.History = append(r.History[:0:0], r.History[n-MaxHistory:]...)
	}
}

// Usage is a sandbox's accumulated resource use, sampled by the reaper.
type Usage struct {
	CPUSeconds       float64 `json:"cpu_seconds"`
	RunningSeconds   float64 `json:"running_seconds"`
	MemoryPeakBytes  int64   `json:"memory_peak_bytes"`
	MemoryGiBSeconds float64 `json:"memory_gib_seconds"`
	// StoredGiBSeconds is the disk (limit) kept while stopped, in GiB·s.
	StoredGiBSeconds float64   `json:"stored_gib_seconds,omitempty"`
	CostMicros       int64     `json:"cost_micros"`
	SampledAt        time.Time `json:"sampled_at"`
}

// Store is the sandbox database. It is safe for concurrent use.
type Store struct {
	db    *bolt.DB
	dir   string
	group writeGroup   // group.go
	cache *recordCache // cache.go
}

// Open opens (creating if needed) the database in dir.
func Open(dir string) (*Store, error) {
	db, err := bolt.Open(filepath.Join(dir, "paddock.db"), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open store: %s is locked by another paddockd", dir)
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get([]byte("schema")); v != nil && string(v) != schemaVersion {
			return fmt.Errorf("unsupported schema version %q", v)
		}
		if err := meta.Put([]byte("schema"), []byte(schemaVersion)); err != nil {
			return err
		}
		if _, err = tx.CreateBucketIfNotExists(bucketSandboxes); err != nil {
			return err
		}
		_, err = tx.CreateBucketIfNotExists(bucketSecrets)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init store: %w", err)
	}
	if err := CleanTemps(dir, time.Minute); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &Store{db: db, dir: dir, cache: newRecordCache()}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Put writes r, replacing any record with the same id.
func (s *Store) Put(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.write(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).Put([]byte(r.ID), b)
	})
}

// Get returns the record with id or sandbox.ErrNotFound.
func (s *Store) Get(id string) (*Record, error) {
	var r *Record
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSandboxes).Get([]byte(id))
		if v == nil {
			return sandbox.ErrNotFound
		}
		var err error
		r, err = s.cache.decode([]byte(id), v)
		return err
	})
	return r, err
}

// Update applies fn to the record with id inside one transaction.
func (s *Store) Update(id string, fn func(*Record) error) (*Record, error) {
	var r *Record
	err := s.write(func(tx *bolt.Tx) error {
		var err error
		r, err = s.updateIn(tx.Bucket(bucketSandboxes), id, fn)
		if err == nil && r == nil {
			err = sandbox.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// updateIn applies fn to the record id in b and writes it back; it
// returns nil, nil when there is no such record.
func (s *Store) updateIn(b *bolt.Bucket, id string, fn func(*Record) error) (*Record, error) {
	v := b.Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	r, err := s.cache.decode([]byte(id), v)
	if err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		return nil, err
	}
	nb, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return r, b.Put([]byte(id), nb)
}

// UpdateMany applies fn to each record in ids inside one transaction;
// missing records are skipped.
func (s *Store) UpdateMany(ids []string, fn func(*Record) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSandboxes)
		for _, id := range ids {
			if _, err := s.updateIn(b, id, fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete removes the record with id; a missing record is not an error.
func (s *Store) Delete(id string) error {
	s.cache.forget(id)
	return s.write(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).Delete([]byte(id))
	})
}

// All returns every record, oldest first (then by id).
func (s *Store) All() ([]*Record, error) {
	var out []*Record
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSandboxes).ForEach(func(k, v []byte) error {
			r, err := s.cache.decode(k, v)
			if err != nil {
				return fmt.Errorf("record %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	if err == nil {
		s.cache.keepOnly(out)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}
