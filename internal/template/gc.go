package template

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// GC removes every layer that no image references, that no pull is using
// and that Config.InUse does not name. It returns the bytes freed. If the
// remaining layers still exceed the disk budget (it was lowered, say) it
// logs a warning: referenced layers are never removed.
func (s *Store) GC(ctx context.Context) (int64, error) {
	s.mu.Lock()
	ref := s.referenced()
	var trash []string
	var freed int64
	for id, li := range s.layers {
		if ref[id] {
			continue
		}
		t, err := s.detach(id)
		if err != nil {
			s.mu.Unlock()
			removeAll(trash)
			return freed, fmt.Errorf("gc: %w", err)
		}
		trash = append(trash, t)
		freed += li.Size
	}
	usage, budget := s.usage, s.cfg.DiskBudget
	s.mu.Unlock()
	removeAll(trash)
	if len(trash) > 0 {
		s.log.Info("template: gc removed layers", "layers", len(trash), "bytes", freed)
	}
	if budget > 0 && usage > budget {
		s.log.Warn("template: layers in use exceed the disk budget", "bytes", usage, "budget", budget)
	}
	return freed, ctx.Err()
}

// Usage returns the bytes charged for the store's layers and the budget
// (0 when there is none).
func (s *Store) Usage() (used, budget int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage + s.pending, s.cfg.DiskBudget
}

// reserve charges n bytes for a layer being unpacked. Over the budget it
// evicts unreferenced layers, least recently used first, and fails with
// ErrBudget when none is left to evict.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	budget := s.cfg.DiskBudget
	if budget <= 0 || s.usage+s.pending+n <= budget {
		s.pending += n
		s.mu.Unlock()
		return nil
	}
	ref := s.referenced()
	var trash []string
	for s.usage+s.pending+n > budget {
		id := s.oldestUnreferenced(ref)
		if id == "" {
			held := s.usage + s.pending
			s.mu.Unlock()
			removeAll(trash)
			return fmt.Errorf("%w: budget is %d bytes, %d are held by images and pulls in progress, and this layer needs %d more",
				ErrBudget, budget, held, n)
		}
		t, err := s.detach(id)
		if err != nil {
			s.mu.Unlock()
			removeAll(trash)
			return fmt.Errorf("evict %s: %w", id, err)
		}
		s.log.Info("template: evicting unreferenced layer for the disk budget", "layer", id)
		trash = append(trash, t)
	}
	s.pending += n
	s.mu.Unlock()
	removeAll(trash)
	return nil
}

// referenced returns the layers that must stay: named by an image, pinned
// by a pull, being unpacked, or in use according to Config.InUse. s.mu
// must be held.
func (s *Store) referenced() map[string]bool {
	ref := map[string]bool{}
	for _, im := range s.images {
		for _, id := range im.Layers {
			ref[id] = true
		}
	}
	for id := range s.pins {
		ref[id] = true
	}
	for id := range s.inflight {
		ref[id] = true
	}
	if s.cfg.InUse != nil {
		layers := filepath.Join(s.cfg.Root, "layers/sha256")
		for _, lower := range s.cfg.InUse() {
			for _, d := range strings.Split(lower, ":") {
				d = filepath.Clean(d)
				if filepath.Base(d) == "rootfs" && filepath.Dir(filepath.Dir(d)) == layers {
					ref["sha256:"+filepath.Base(filepath.Dir(d))] = true
				}
			}
		}
	}
	return ref
}

// oldestUnreferenced returns the least recently used layer not in ref, or
// "". s.mu must be held.
func (s *Store) oldestUnreferenced(ref map[string]bool) string {
	var best string
	var bestTime time.Time
	for id, li := range s.layers {
		if !ref[id] && (best == "" || li.lastUsed.Before(bestTime)) {
			best, bestTime = id, li.lastUsed
		}
	}
	return best
}

// detach moves a layer out of layers/ into tmp/ (one rename, so it is
// gone from the store at once) and returns the path to delete. s.mu must
// be held.
func (s *Store) detach(id string) (string, error) {
	li := s.layers[id]
	t := filepath.Join(s.cfg.Root, "tmp", fmt.Sprintf("gc-%s-%d", strings.TrimPrefix(id, "sha256:")[:16], time.Now().UnixNano()))
	if err := os.Rename(s.layerDir(id), t); err != nil {
		return "", err
	}
	delete(s.layers, id)
	s.usage -= li.Size
	return t, nil
}

func removeAll(paths []string) {
	for _, p := range paths {
		os.RemoveAll(p)
	}
}

// pin keeps layers from GC and eviction while a pull uses them.
func (s *Store) pin(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.pins[id]++
	}
}

func (s *Store) unpin(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.pins[id]--; s.pins[id] <= 0 {
			delete(s.pins, id)
		}
	}
}
