package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/internal/store"
)

// Bounds of directory watching. Watching polls the directory through the
// agent (a listing every watchPoll) and reports the differences, so an
// event names a file that was created, written (size or mtime changed)
// or removed between two polls; renames show as remove + create.
const (
	watchPoll = 250 * time.Millisecond
	// maxWatchers bounds the polling watchers (CreateWatcher) alive at
	// once across all sandboxes; watcherTTL ends one not read for that long.
	maxWatchers = 1024
	watcherTTL  = 10 * time.Minute
)

type watchRequest struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// fsWatchDir streams the events of a directory: a start event, then
// filesystem events as polls find them, with keepalives.
func (s *Server) fsWatchDir(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req watchRequest
	if err := readStreamRequest(w, r, &req); err != nil {
		newStream(w).End(err)
		return
	}
	st := newStream(w)
	dir, snap, err := s.watchStart(r.Context(), rec.ID, req)
	if err != nil {
		st.End(err)
		return
	}
	if err := st.Send(map[string]any{"start": struct{}{}}); err != nil {
		return
	}
	stop := s.keepalive(r, st, map[string]any{"keepalive": struct{}{}})
	defer stop()
	t := time.NewTicker(watchPoll)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			st.End(r.Context().Err())
			return
		case <-t.C:
		}
		next, err := s.snapshot(r.Context(), rec.ID, dir, req.Recursive)
		if err != nil {
			st.End(err)
			return
		}
		for _, ev := range diff(dir, snap, next) {
			if err := st.Send(map[string]any{"filesystem": ev}); err != nil {
				return
			}
		}
		snap = next
	}
}

// watchStart resolves the directory (to the absolute path the agent
// reports) and takes the first snapshot.
func (s *Server) watchStart(ctx context.Context, id string, req watchRequest) (string, map[string]string, error) {
	e, err := s.agent.StatFile(ctx, id, req.Path)
	if err != nil {
		return "", nil, err
	}
	if e.Type != "dir" {
		return "", nil, rpcErrorf(codeInvalidArgument, "%s is not a directory", req.Path)
	}
	snap, err := s.snapshot(ctx, id, e.Path, req.Recursive)
	return e.Path, snap, err
}

// watcher is one polling watcher: the last snapshot it reported against.
type watcher struct {
	sandbox   string
	dir       string
	recursive bool
	snap      map[string]string
	used      time.Time
}

type watchTable struct {
	mu sync.Mutex
	m  map[string]*watcher
}

func (t *watchTable) add(w *watcher) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]*watcher{}
	}
	for id, old := range t.m {
		if time.Since(old.used) > watcherTTL {
			delete(t.m, id)
		}
	}
	if len(t.m) >= maxWatchers {
		return "", false
	}
	b := make([]byte, 12)
	rand.Read(b)
	id := hex.EncodeToString(b)
	t.m[id] = w
	return id, true
}

func (t *watchTable) get(sandbox, id string) *watcher {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.m[id]
	if w == nil || w.sandbox != sandbox {
		return nil
	}
	w.used = time.Now()
	return w
}

func (t *watchTable) remove(sandbox, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.m[id]; w != nil && w.sandbox == sandbox {
		delete(t.m, id)
		return true
	}
	return false
}

func (s *Server) fsCreateWatcher(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req watchRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	dir, snap, err := s.watchStart(r.Context(), rec.ID, req)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	id, ok := s.watchers.add(&watcher{sandbox: rec.ID, dir: dir, recursive: req.Recursive, snap: snap, used: time.Now()})
	if !ok {
		writeUnaryError(w, rpcErrorf(codeResourceExhausted, "at most %d watchers", maxWatchers))
		return
	}
	writeUnary(w, map[string]any{"watcherId": id})
}

type watcherRequest struct {
	WatcherID string `json:"watcherId"`
}

// fsGetWatcherEvents reports the changes since the watcher's last read.
func (s *Server) fsGetWatcherEvents(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req watcherRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	wt := s.watchers.get(rec.ID, req.WatcherID)
	if wt == nil {
		writeUnaryError(w, rpcErrorf(codeNotFound, "watcher %q not found", req.WatcherID))
		return
	}
	next, err := s.snapshot(r.Context(), rec.ID, wt.dir, wt.recursive)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	s.watchers.mu.Lock()
	events := diff(wt.dir, wt.snap, next)
	wt.snap = next
	s.watchers.mu.Unlock()
	if events == nil {
		events = []fsEvent{}
	}
	writeUnary(w, map[string]any{"events": events})
}

func (s *Server) fsRemoveWatcher(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req watcherRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if !s.watchers.remove(rec.ID, req.WatcherID) {
		writeUnaryError(w, rpcErrorf(codeNotFound, "watcher %q not found", req.WatcherID))
		return
	}
	writeUnary(w, struct{}{})
}
