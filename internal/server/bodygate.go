package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
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
	// templateFreeAbove is the body size from which a template body's
	// decode starts on a collected heap.
	templateFreeAbove = 16 << 20
)

// bodyGate admits work on large request bodies in two steps: a key
// uploads at most perKey bodies at once (its slow or stalled uploads wait
// on its own slots, never on another key's), and only a body that has
// fully arrived takes one of the daemon-wide decode slots. Memory for
// bodies is so bounded by keys*perKey*limit, and decoding (about 3.5
// times the body for a JSON decode) by decodes*limit.
type bodyGate struct {
	perKey  int
	decodes chan struct{}
	// freeAbove: before decoding a body at least this large (0: never)
	// the heap of the previous decodes is collected and returned, so
	// their garbage never adds up with this one's.
	freeAbove int

	mu   sync.Mutex
	keys map[string]*keySlots
}

type keySlots struct {
	ch    chan struct{}
	users int
}

func newBodyGate(perKey, decodes, freeAbove int) *bodyGate {
	return &bodyGate{perKey: max(perKey, 1), decodes: make(chan struct{}, max(decodes, 1)), freeAbove: freeAbove, keys: map[string]*keySlots{}}
}

// read reads r's body (at most limit bytes) within one of key's upload
// slots, then waits for a decode slot. The caller decodes the bytes and
// calls release, which frees both slots: a key holds at most perKey
// bodies, arrived or not.
func (g *bodyGate) read(w http.ResponseWriter, r *http.Request, key string, limit int64) (body []byte, release func(), err error) {
	ctx := r.Context()
	ks := g.slots(key)
	defer g.unref(key, ks)
	if err := acquire(ctx, ks.ch); err != nil {
		return nil, nil, err
	}
	body, err = readBounded(w, r, limit)
	if err == nil {
		err = acquire(ctx, g.decodes)
	}
	if err != nil {
		<-ks.ch
		return nil, nil, err
	}
	if g.freeAbove > 0 && len(body) >= g.freeAbove {
		debug.FreeOSMemory()
	}
	return body, func() { <-g.decodes; <-ks.ch }, nil
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

// readBounded reads a whole body of at most limit bytes: into exactly
// what Content-Length announces (already checked against limit), or into
// a growing buffer for a body of unknown length.
func readBounded(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: request body larger than %d bytes", sandbox.ErrTooLarge, limit)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	if r.ContentLength >= 0 {
		buf := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(body, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: request body shorter than its Content-Length", sandbox.ErrInvalid)
			}
			return nil, err
		}
		return buf, nil
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
