package store

import (
	"encoding/json"
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The decoded-record cache. The reaper reads every record each second
// and metering every five; decoding a record's JSON (about 20 µs) was most
// of an idle daemon's CPU at thousands of sandboxes. The cache keeps each
// record decoded, keyed by its id and a hash of the stored bytes, so a
// record that has not changed is not decoded again. It is checked against
// the bytes in the database on every read and filled only by decoding
// them, never written through, so it cannot disagree with what a
// transaction committed, and what a read returns is exactly what a fresh
// decode would. Callers get copies (Clone); the
// cached record itself is never handed out.

// recordCache maps a record id to its last decoded value.
type recordCache struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[string]cachedRecord
	// decodes counts JSON decodes (the tests read it).
	decodes atomic.Int64
}

type cachedRecord struct {
	sum uint64
	n   int
	rec *Record
}

func newRecordCache() *recordCache {
	return &recordCache{seed: maphash.MakeSeed(), m: map[string]cachedRecord{}}
}

// decode returns the record stored as v under key k, from the cache when
// v is what was decoded last time.
func (c *recordCache) decode(k, v []byte) (*Record, error) {
	sum := maphash.Bytes(c.seed, v)
	c.mu.Lock()
	e, ok := c.m[string(k)]
	c.mu.Unlock()
	if ok && e.sum == sum && e.n == len(v) {
		return e.rec.Clone(), nil
	}
	c.decodes.Add(1)
	r := new(Record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, err
	}
	c.put(k, sum, len(v), r.Clone())
	return r, nil
}

func (c *recordCache) put(k []byte, sum uint64, n int, rec *Record) {
	c.mu.Lock()
	c.m[string(k)] = cachedRecord{sum: sum, n: n, rec: rec}
	c.mu.Unlock()
}

func (c *recordCache) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// keepOnly drops the entries of records not in recs, every stored
// record (those deleted by a transaction that failed after forget, or
// never read since). Records are stored under their ids, so an entry is
// stale only when the cache holds more entries than there are records:
// the set of ids is built only then.
func (c *recordCache) keepOnly(recs []*Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) <= len(recs) {
		return
	}
	ids := make(map[string]struct{}, len(recs))
	for _, r := range recs {
		ids[r.ID] = struct{}{}
	}
	for id := range c.m {
		if _, ok := ids[id]; !ok {
			delete(c.m, id)
		}
	}
}

// Clone returns a deep copy of r: it shares no map, slice or pointer
// with r.
func (r *Record) Clone() *Record {
	c := *r
	c.EndedAt = cloneTime(r.EndedAt)
	c.PausedAt = cloneTime(r.PausedAt)
	c.StoppedAt = cloneTime(r.StoppedAt)
	c.StopAt = cloneTime(r.StopAt)
	c.Metadata = maps.Clone(r.Metadata)
	c.Env = maps.Clone(r.Env)
	c.Placeholders = maps.Clone(r.Placeholders)
	c.History = slices.Clone(r.History)
	c.Secrets = slices.Clone(r.Secrets)
	c.Network.Allow = slices.Clone(r.Network.Allow)
	c.Network.Deny = slices.Clone(r.Network.Deny)
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
