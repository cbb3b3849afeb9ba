package agent

// File watching: GET /files/watch streams the changes under a directory as
// NDJSON api.WatchEvents, read from an inotify instance of the agent's own
// (which sees the sandbox's mount namespace). Every bound is fixed: the
// watches open at once (a token each), the directories one watch covers
// and the events it holds for a slow reader (then one overflow event
// stands for the ones dropped).

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

// Watch bounds (Config.MaxWatches, MaxWatchDirs, WatchQueue).
const (
	DefaultMaxWatches   = 8
	DefaultMaxWatchDirs = 4096
	DefaultWatchQueue   = 1024

	watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK
	// watchReadBuf holds many inotify events per read.
	watchReadBuf = 64 << 10
)

// handleWatch streams the changes under ?path (GET /files/watch). The
// answer's headers are sent once the watch is in place.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) error {
	root, err := s.pathParam(r)
	if err != nil {
		return err
	}
	recursive, err := boolParam(r, "recursive")
	if err != nil {
		return err
	}
	if fi, err := os.Stat(root); err != nil {
		return err
	} else if !fi.IsDir() {
		return badRequest("%s is not a directory", root)
	}
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		return newError(api.CodeLimitExceeded, "at most %d file watches at once in a sandbox", cap(s.watches))
	}
	wt, err := newWatcher(root, recursive, s.cfg.MaxWatchDirs, s.cfg.WatchQueue)
	if err != nil {
		return err
	}
	defer wt.close()
	go wt.run()

	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for {
		ev, ok := wt.q.pop(r.Context())
		if !ok {
			return nil
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
	}
}

// watcher is one inotify instance over a directory (tree).
type watcher struct {
	f         *os.File
	fd        int
	root      string
	recursive bool
	maxDirs   int
	dirs      map[int]string // watch descriptor → directory
	q         *watchQueue
}

func newWatcher(root string, recursive bool, maxDirs, queue int) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		if errors.Is(err, unix.EMFILE) {
			return nil, newError(api.CodeLimitExceeded, "no inotify instance left: %v", err)
		}
		return nil, err
	}
	wt := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, root: root, recursive: recursive,
		maxDirs: maxDirs, dirs: map[int]string{}, q: newWatchQueue(queue)}
	if err := wt.add(root, false); err != nil {
		wt.close()
		return nil, err
	}
	return wt, nil
}

func (wt *watcher) close() { wt.f.Close() }

// add watches dir, and with recursive every directory under it. With
// report, what it finds is reported as created (it may have appeared
// before the watch was in place).
func (wt *watcher) add(dir string, report bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // vanished meanwhile
		}
		if p != dir && report {
			wt.q.push(api.WatchEvent{Type: api.WatchCreate, Path: p, IsDir: d.IsDir(), Time: now()})
		}
		if !d.IsDir() {
			return nil
		}
		if len(wt.dirs) >= wt.maxDirs {
			return newError(api.CodeLimitExceeded, "a watch covers at most %d directories", wt.maxDirs)
		}
		mask := uint32(watchMask)
		if p != wt.root {
			mask |= unix.IN_DONT_FOLLOW
		}
		wd, err := unix.InotifyAddWatch(wt.fd, p, mask)
		if err != nil {
			if p == dir && !report {
				if errors.Is(err, unix.ENOSPC) {
					return newError(api.CodeLimitExceeded, "no inotify watch left: %v", err)
				}
				return err
			}
			return nil
		}
		wt.dirs[wd] = p
		if !wt.recursive {
			return filepath.SkipDir
		}
		return nil
	})
}

// run reads events until the watcher is closed or its root is gone.
func (wt *watcher) run() {
	defer wt.q.end()
	buf := make([]byte, watchReadBuf)
	for {
		n, err := wt.f.Read(buf)
		if err != nil {
			return
		}
		if !wt.handle(buf[:n]) {
			return
		}
	}
}

// handle turns one read of inotify events into WatchEvents. It reports
// false once the root is gone.
func (wt *watcher) handle(buf []byte) bool {
	moved := map[uint32]api.WatchEvent{} // IN_MOVED_FROM by cookie
	var order []uint32
	alive := true
	for len(buf) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(raw.Len)
		if end > len(buf) {
			break
		}
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:end]), "\x00")
		buf = buf[end:]
		mask, wd := raw.Mask, int(raw.Wd)
		if mask&unix.IN_Q_OVERFLOW != 0 {
			wt.q.push(api.WatchEvent{Type: api.WatchOverflow, Message: "the kernel's event queue overflowed", Time: now()})
			continue
		}
		dir, ok := wt.dirs[wd]
		if !ok {
			continue
		}
		if mask&unix.IN_IGNORED != 0 {
			delete(wt.dirs, wd)
			continue
		}
		if mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
			if dir == wt.root {
				wt.q.push(api.WatchEvent{Type: api.WatchRemove, Path: dir, IsDir: true, Time: now()})
				alive = false
			}
			continue
		}
		p := filepath.Join(dir, name)
		isDir := mask&unix.IN_ISDIR != 0
		ev := api.WatchEvent{Path: p, IsDir: isDir, Time: now()}
		switch {
		case mask&unix.IN_CREATE != 0:
			ev.Type = api.WatchCreate
			wt.q.push(ev)
			if isDir && wt.recursive {
				wt.addLater(p)
			}
		case mask&unix.IN_MODIFY != 0:
			ev.Type = api.WatchWrite
			wt.q.push(ev)
		case mask&unix.IN_DELETE != 0:
			ev.Type = api.WatchRemove
			wt.q.push(ev)
		case mask&unix.IN_MOVED_FROM != 0:
			moved[raw.Cookie] = ev
			order = append(order, raw.Cookie)
		case mask&unix.IN_MOVED_TO != 0:
			if from, ok := moved[raw.Cookie]; ok {
				delete(moved, raw.Cookie)
				ev.Type, ev.OldPath = api.WatchRename, from.Path
				wt.q.push(ev)
				if isDir {
					wt.renameDirs(from.Path, p)
				}
				continue
			}
			ev.Type = api.WatchCreate
			wt.q.push(ev)
			if isDir && wt.recursive {
				wt.addLater(p)
			}
		}
	}
	for _, c := range order { // moved out of the watched tree
		if ev, ok := moved[c]; ok {
			ev.Type = api.WatchRemove
			wt.q.push(ev)
			if ev.IsDir {
				wt.dropDirs(ev.Path)
			}
		}
	}
	return alive
}

// addLater watches a directory that appeared under the tree.
func (wt *watcher) addLater(p string) {
	if err := wt.add(p, true); err != nil {
		wt.q.push(api.WatchEvent{Type: api.WatchOverflow, Path: p, Time: now(),
			Message: "directory not watched: " + err.Error()})
	}
}

// renameDirs rewrites the watched directories under old to under new.
func (wt *watcher) renameDirs(old, new string) {
	for wd, d := range wt.dirs {
		if rest, ok := strings.CutPrefix(d, old); ok && (rest == "" || rest[0] == '/') {
			wt.dirs[wd] = new + rest
		}
	}
}

// dropDirs stops watching the directories under p.
func (wt *watcher) dropDirs(p string) {
	for wd, d := range wt.dirs {
		if rest, ok := strings.CutPrefix(d, p); ok && (rest == "" || rest[0] == '/') {
			_, _ = unix.InotifyRmWatch(wt.fd, uint32(wd))
			delete(wt.dirs, wd)
		}
	}
}

func now() *time.Time {
	t := time.Now().UTC()
	return &t
}

// watchQueue holds at most max events for the writer; when full it drops
// events and the writer gets one overflow event in their place.
type watchQueue struct {
	mu    sync.Mutex
	ready chan struct{} // signalled when events arrive or the queue ends
	max   int
	evs   []api.WatchEvent
	lost  int
	ended bool
}

func newWatchQueue(max int) *watchQueue {
	return &watchQueue{ready: make(chan struct{}, 1), max: max}
}

func (q *watchQueue) notify() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// push adds ev, or counts it lost when the queue is full. A write event
// right after a write to the same path is merged into it.
func (q *watchQueue) push(ev api.WatchEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.evs); n > 0 && ev.Type == api.WatchWrite && q.evs[n-1].Type == api.WatchWrite && q.evs[n-1].Path == ev.Path {
		return
	}
	if len(q.evs) >= q.max {
		q.lost++
		return
	}
	if q.lost > 0 {
		q.evs = append(q.evs, q.overflow())
		if len(q.evs) >= q.max {
			q.lost = 1
			q.notify()
			return
		}
	}
	q.evs = append(q.evs, ev)
	q.notify()
}

// overflow makes the event that stands for the lost ones; q is locked.
func (q *watchQueue) overflow() api.WatchEvent {
	ev := api.WatchEvent{Type: api.WatchOverflow, Time: now(),
		Message: "events were dropped: the reader is slower than the changes (" + strconv.Itoa(q.lost) + " lost)"}
	q.lost = 0
	return ev
}

// end marks the queue finished: pop drains it, then reports false.
func (q *watchQueue) end() {
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
	q.notify()
}

// pop waits for the next event; false once ctx ends or the queue ended
// and is empty.
func (q *watchQueue) pop(ctx context.Context) (api.WatchEvent, bool) {
	for {
		q.mu.Lock()
		if len(q.evs) > 0 {
			ev := q.evs[0]
			q.evs[0] = api.WatchEvent{}
			q.evs = q.evs[1:]
			q.mu.Unlock()
			return ev, true
		}
		if q.lost > 0 {
			ev := q.overflow()
			q.mu.Unlock()
			return ev, true
		}
		ended := q.ended
		q.mu.Unlock()
		if ended {
			return api.WatchEvent{}, false
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return api.WatchEvent{}, false
		}
	}
}
