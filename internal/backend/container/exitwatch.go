package container

import (
	"errors"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"
)

// exitWatch learns of sandbox inits' ends as they happen: each watched
// init is a pidfd in one epoll set, served by one goroutine, so a
// thousand idle sandboxes cost no CPU and no thread each (the daemon used
// to run `runc state` for every sandbox every few seconds, and to block a
// thread in wait4 per sandbox). An init that is the daemon's child (it
// reparents to the daemon, a child subreaper, once the runtime exits) is
// reaped through its pidfd as soon as it exits.
type exitWatch struct {
	log  *slog.Logger
	epfd int

	mu      sync.Mutex
	ids     map[string]int  // sandbox id → pidfd
	fds     map[int]string  // pidfd → sandbox id
	exited  map[string]bool // init exited (until watched again or unwatched)
	pending map[string]bool // exited, not yet drained
	failed  map[string]bool // could not be watched: reported as exited until watched
	started bool
}

func newExitWatch(log *slog.Logger) (*exitWatch, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &exitWatch{log: log, epfd: epfd, ids: map[string]int{}, fds: map[int]string{}, exited: map[string]bool{}, pending: map[string]bool{}, failed: map[string]bool{}}, nil
}

// watch starts watching process pid as sandbox id's init, replacing any
// earlier watch of id and forgetting an unreported earlier exit. When it
// fails, id is reported by every drain until a watch succeeds, so that
// its owner keeps asking (Alive, which watches it again) rather than
// never hear of its exit.
func (w *exitWatch) watch(id string, pid int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(id)
	fd, err := unix.PidfdOpen(pid, 0) // pidfds are close-on-exec
	if err != nil {
		w.failed[id] = true
		return err
	}
	return w.addLocked(id, fd)
}

// adopt is watch for a pid that the runtime reported, which it checks
// first, and it says whether that init still runs. The runtime's word is
// not enough: runsc reports its sandbox running as long as the sandbox's
// process is a zombie (kill(pid, 0) succeeds on one), and a pid may have
// been reused since the init died. So an init that is gone, that owned
// says is not the sandbox's, or that has exited but not been reaped, is
// recorded as exited. An error other than a vanished process leaves id
// reported as watch does, and alive as the runtime said.
func (w *exitWatch) adopt(id string, pid int, owned func(pid int) bool) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(id)
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		w.exited[id] = true
		return false, nil
	}
	if err != nil {
		w.failed[id] = true
		return true, err
	}
	// The pidfd pins the process: owned looks at the one it refers to.
	if !owned(pid) {
		unix.Close(fd)
		w.exited[id] = true
		return false, nil
	}
	if err := w.addLocked(id, fd); err != nil {
		return true, err
	}
	if exited(fd) {
		w.endLocked(fd)
		return false, nil
	}
	return true, nil
}

// forgetLocked drops id's watch and its recorded exit.
func (w *exitWatch) forgetLocked(id string) {
	w.dropLocked(id)
	delete(w.exited, id)
	delete(w.pending, id)
}

// addLocked adds pidfd fd, which it then owns, as id's watch.
func (w *exitWatch) addLocked(id string, fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		w.failed[id] = true
		return err
	}
	delete(w.failed, id)
	w.ids[id], w.fds[fd] = fd, id
	if !w.started {
		w.started = true
		go w.loop()
	}
	return nil
}

// unwatch stops watching sandbox id and forgets its exit.
func (w *exitWatch) unwatch(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(id)
	delete(w.failed, id)
}

func (w *exitWatch) dropLocked(id string) {
	fd, ok := w.ids[id]
	if !ok {
		return
	}
	unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	unix.Close(fd)
	delete(w.ids, id)
	delete(w.fds, fd)
}

// state reports whether the watch knows sandbox id (watched, or seen to
// exit since) and, if so, whether its init still runs.
func (w *exitWatch) state(id string) (known, alive bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if fd, ok := w.ids[id]; ok {
		if exited(fd) {
			w.endLocked(fd)
			return true, false
		}
		return true, true
	}
	return w.exited[id], false
}

// drain returns and forgets the sandboxes whose init exited, and returns
// those that could not be watched.
func (w *exitWatch) drain() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.pending)+len(w.failed))
	for id := range w.pending {
		out = append(out, id)
	}
	for id := range w.failed {
		if !w.pending[id] {
			out = append(out, id)
		}
	}
	clear(w.pending)
	return out
}

func (w *exitWatch) loop() {
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.log.Error("exit watch stopped", "err", err)
			return
		}
		w.mu.Lock()
		for _, ev := range evs[:n] {
			// The fd may have been closed and its number reused for
			// another sandbox since epoll_wait returned: trust only a
			// pidfd that says so itself.
			if fd := int(ev.Fd); w.fds[fd] != "" && exited(fd) {
				w.endLocked(fd)
			}
		}
		w.mu.Unlock()
	}
}

// endLocked records the exit of the init behind pidfd fd, reaps it if it
// is the daemon's child, and closes fd.
func (w *exitWatch) endLocked(fd int) {
	id := w.fds[fd]
	var info unix.Siginfo
	unix.Waitid(unix.P_PIDFD, fd, &info, unix.WEXITED|unix.WNOHANG, nil) // ECHILD: not ours
	unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	unix.Close(fd)
	delete(w.fds, fd)
	delete(w.ids, id)
	w.exited[id], w.pending[id] = true, true
}

// exited reports whether the process behind pidfd fd has exited.
func exited(fd int) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
