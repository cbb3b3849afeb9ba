package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// keyIDPattern is the shape of a key id (store.Keys makes "key_" + 16 hex);
// ids read from Secrets must match it before they name a file.
var keyIDPattern = regexp.MustCompile(`^key_[0-9a-f]{8,64}$`)

// CreateKey makes a new API key as a Secret in ns holding its id, name and
// SHA-256 (never the key itself) and returns the key, shown once.
func CreateKey(ctx context.Context, kc *kube.Client, ns, name string) (secret string, rec store.KeyRecord, err error) {
	if name == "" || len(name) > 128 {
		return "", rec, fmt.Errorf("key name must be 1-128 characters")
	}
	raw := make([]byte, 32)
	rand.Read(raw)
	secret = store.KeyPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
	id := make([]byte, 8)
	rand.Read(id)
	sum := sha256.Sum256([]byte(secret))
	rec = store.KeyRecord{ID: "key_" + hex.EncodeToString(id), Name: name,
		SHA256: hex.EncodeToString(sum[:]), CreatedAt: time.Now().UTC()}
	rb, _ := json.Marshal(rec)
	s := Secret{APIVersion: "v1", Kind: "Secret", Type: "paddock.dev/api-key",
		Metadata: ObjectMeta{Name: "paddock-key-" + strings.TrimPrefix(rec.ID, "key_"),
			Labels: map[string]string{labelKind: kindAPIKey}},
		Data: map[string][]byte{"record": rb}}
	if err := kc.Create(ctx, secretsPath(ns), s, nil); err != nil {
		return "", rec, fmt.Errorf("create key secret: %w", err)
	}
	return secret, rec, nil
}

// listKeys reads every API-key Secret in ns; malformed ones are skipped.
func listKeys(ctx context.Context, kc *kube.Client, ns string) ([]store.KeyRecord, error) {
	var l SecretList
	if err := kc.Get(ctx, secretsPath(ns)+selector(labelKind, kindAPIKey), &l); err != nil {
		return nil, err
	}
	out := make([]store.KeyRecord, 0, len(l.Items))
	for _, s := range l.Items {
		var r store.KeyRecord
		if json.Unmarshal(s.Data["record"], &r) != nil || !keyIDPattern.MatchString(r.ID) || len(r.SHA256) != 64 {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// syncKeys makes dir (a paddockd's keys directory) hold exactly the keys of
// the Secrets: the node then authenticates the same keys, with the same
// ids (sandbox owners), as every other node and the gateway. A failed list
// changes nothing.
func syncKeys(ctx context.Context, kc *kube.Client, ns, dir string) error {
	recs, err := listKeys(ctx, kc, ns)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, r := range recs {
		name := r.ID + ".json"
		want[name] = true
		b, _ := json.MarshalIndent(r, "", "  ")
		p := filepath.Join(dir, name)
		if old, err := os.ReadFile(p); err == nil && string(old) == string(b) {
			continue
		}
		if err := store.WriteFileAtomic(p, b, 0o600); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") && !want[e.Name()] {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// keyCache is the gateway's view of the API keys, re-read when older than
// refresh (and, at most once a second, on an unknown key). One request
// re-reads at a time: a request whose key is in the view goes on with it
// (the re-read runs in the background), one whose key is not waits for the
// re-read in flight.
type keyCache struct {
	kc      *kube.Client
	ns      string
	refresh time.Duration

	mu      sync.Mutex
	byHash  map[string]store.KeyRecord
	at      time.Time
	loading chan struct{} // closed when the re-read in flight ends; nil if none
}

// lookup returns the owner (key id) of secret.
func (c *keyCache) lookup(ctx context.Context, secret string) (string, bool) {
	if !strings.HasPrefix(secret, store.KeyPrefix) || len(secret) > 256 {
		return "", false
	}
	sum := sha256.Sum256([]byte(secret))
	h := hex.EncodeToString(sum[:])
	c.mu.Lock()
	_, ok := c.byHash[h]
	age := time.Since(c.at)
	var wait chan struct{}
	if c.loading == nil && (c.byHash == nil || age > c.refresh || (!ok && age > time.Second)) {
		c.loading = make(chan struct{})
		go c.load(context.WithoutCancel(ctx), c.loading)
	}
	if !ok {
		wait = c.loading
	}
	c.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return "", false
		}
	}
	c.mu.Lock()
	r, ok := c.byHash[h]
	c.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(r.SHA256), []byte(h)) != 1 {
		return "", false
	}
	return r.ID, true
}

// load re-reads the key Secrets and then closes done; on an error the last
// view stays.
func (c *keyCache) load(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := listKeys(ctx, c.kc, c.ns)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(done)
	c.loading = nil
	if err != nil {
		return
	}
	c.byHash = make(map[string]store.KeyRecord, len(recs))
	for _, r := range recs {
		c.byHash[r.SHA256] = r
	}
	c.at = time.Now()
}
