package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// Defaults of the body gates.
const (
	// DefaultBigBodiesPerKey is how many large exec bodies one key
	// uploads at once; DefaultBigBodyDecodes how many arrived ones the
	// daemon decodes at once, all keys together.
	DefaultBigBodiesPerKey = 2
	DefaultBigBodyDecodes  = 4
	// templateBodiesPerKey and templateBodyDecodes are the same for
	// template bodies (JSON recipes and tar contexts, up to 96 MiB).
	templateBodiesPerKey = 1
	templateBodyDecodes  = 1
)

// bodyGate admits work on large request bodies in two steps: a key
// uploads at most perKey bodies at once (its slow or stalled uploads wait
// on its own slots, never on another key's), and only a body that has
// fully arrived takes one of the daemon-wide decode slots. Memory for
// bodies is so bounded by keys*perKey*limit while uploading and by
// decodes*limit while decoding.
type bodyGate struct {
	perKey  int
	decodes chan struct{}

	mu   sync.Mutex
	keys map[string]*keySlots
}

type keySlots struct {
	ch    chan struct{}
	users int
}

func newBodyGate(perKey, decodes int) *bodyGate {
	return &bodyGate{perKey: max(perKey, 1), decodes: make(chan struct{}, max(decodes, 1)), keys: map[string]*keySlots{}}
}

// read reads r's body (at most limit bytes) within one of key's upload
// slots, then waits for a decode slot. The caller decodes the bytes and
// calls release.
func (g *bodyGate) read(w http.ResponseWriter, r *http.Request, key string, limit int64) (body []byte, release func(), err error) {
	ctx := r.Context()
	ks := g.slots(key)
	defer g.unref(key, ks)
	select {
	case ks.ch <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	body, err = readBounded(w, r, limit)
	<-ks.ch
	if err != nil {
		return nil, nil, err
	}
	if err := acquire(ctx, g.decodes); err != nil {
		return nil, nil, err
	}
	return body, func() { <-g.decodes }, nil
}

func (g *bodyGate) slots(key string) *keySlots {
	g.mu.Lock()
	defer g.mu.Unlock()
	ks := g.keys[key]
	if ks == nil {
		ks = &keySlots{ch: make(chan struct{}, g.perKey)}
		g.keys[key] = ks
	}
	ks.users++
	return ks
}

func (g *bodyGate) unref(key string, ks *keySlots) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ks.users--; ks.users == 0 {
		delete(g.keys, key)
	}
}

func acquire(ctx context.Context, ch chan struct{}) error {
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readBounded reads a whole body of at most limit bytes, allocating what
// Content-Length announces (already checked against limit) or growing.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", sandbox.ErrTooLarge, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
