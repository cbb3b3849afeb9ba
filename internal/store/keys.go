package store

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// KeyPrefix starts every API key so that leaked keys are easy to spot.
const KeyPrefix = "pdk_"

// KeyRecord is the persisted form of an API key.
type KeyRecord struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}

// Keys reads and writes API key files in a directory. The daemon re-reads
// the directory when it changes, so keys created by another process take
// effect at once.
type Keys struct {
	dir string

	mu      sync.Mutex
	modTime time.Time
	byHash  map[string]KeyRecord
}

// OpenKeys returns the key set kept in <stateDir>/keys.
func OpenKeys(stateDir string) (*Keys, error) {
	dir := filepath.Join(stateDir, "keys")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keys dir: %w", err)
	}
	// Another `paddockd keys create` may be writing right now: only temps
	// a minute old are a crash's.
	if err := CleanTemps(dir, time.Minute); err != nil {
		return nil, err
	}
	return &Keys{dir: dir}, nil
}

// Create makes a new key named name and returns its secret, which is shown
// once and never stored.
func (k *Keys) Create(name string) (secret string, rec KeyRecord, err error) {
	if name == "" || len(name) > 128 {
		return "", rec, errors.New("key name must be 1-128 characters")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", rec, err
	}
	enc := base32.StdEncoding.WithPadding(base32.NoPadding)
	secret = KeyPrefix + strings.ToLower(enc.EncodeToString(raw))
	idRaw := make([]byte, 8)
	rand.Read(idRaw)
	rec = KeyRecord{
		ID:        "key_" + hex.EncodeToString(idRaw),
		Name:      name,
		SHA256:    hashKey(secret),
		CreatedAt: time.Now().UTC(),
	}
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := WriteFileAtomic(filepath.Join(k.dir, rec.ID+".json"), b, 0o600); err != nil {
		return "", rec, err
	}
	return secret, rec, nil
}

// List returns every key record.
func (k *Keys) List() ([]KeyRecord, error) {
	if err := k.reload(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]KeyRecord, 0, len(k.byHash))
	for _, r := range k.byHash {
		out = append(out, r)
	}
	return out, nil
}

// Lookup returns the record of secret, or false.
func (k *Keys) Lookup(secret string) (KeyRecord, bool) {
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) > 256 {
		return KeyRecord{}, false
	}
	if err := k.reload(); err != nil {
		return KeyRecord{}, false
	}
	h := hashKey(secret)
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.byHash[h]
	if !ok || subtle.ConstantTimeCompare([]byte(r.SHA256), []byte(h)) != 1 {
		return KeyRecord{}, false
	}
	return r, true
}

// reload re-reads the key directory if its modification time changed.
func (k *Keys) reload() error {
	st, err := os.Stat(k.dir)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byHash != nil && st.ModTime().Equal(k.modTime) {
		return nil
	}
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		return err
	}
	m := make(map[string]KeyRecord, len(ents))
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(k.dir, e.Name()))
		if err != nil {
			continue
		}
		var r KeyRecord
		if json.Unmarshal(b, &r) == nil && r.SHA256 != "" {
			m[r.SHA256] = r
		}
	}
	k.byHash, k.modTime = m, st.ModTime()
	return nil
}

func hashKey(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}
