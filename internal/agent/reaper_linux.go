package agent

import (
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reaper reaps every child of the process, as PID 1 must, and hands the
// statuses of the children started through forkExec to their owners.
type reaper struct {
	log  *slog.Logger
	sigs chan os.Signal
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex // held across fork, so a fast exit finds its waiter
	waiters map[int]chan unix.WaitStatus
	stopped bool
}

func startReaper(log *slog.Logger) *reaper {
	r := &reaper{
		log:     log,
		sigs:    make(chan os.Signal, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		waiters: make(map[int]chan unix.WaitStatus),
	}
	signal.Notify(r.sigs, unix.SIGCHLD)
	go r.loop()
	return r
}

func (r *reaper) loop() {
	defer close(r.done)
	// No ticker: an idle sandbox's PID 1 must not wake on its own. No
	// exit is missed without one. SIGCHLDs that coalesce still leave one
	// in r.sigs (buffered), and reapAll drains every exited child with
	// WNOHANG each time, so a child that exits while reapAll runs is
	// reaped on the next pass that signal starts.
	for {
		r.reapAll()
		select {
		case <-r.sigs:
		case <-r.quit:
			signal.Stop(r.sigs)
			return
		}
	}
}

// reapAll reaps every child that has exited.
func (r *reaper) reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- ws
		} else {
			r.log.Debug("reaped orphan", "pid", pid, "status", int(ws))
		}
	}
}

// stop ends reaping. Children still awaited are then waited for one by
// one, and later starts wait for their own child only.
func (r *reaper) stop() {
	close(r.quit)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for pid, ch := range r.waiters {
		delete(r.waiters, pid)
		go func() {
			es := waitPID(pid)
			ch <- es.ws
		}()
	}
}

// waitPID waits for the child pid.
func waitPID(pid int) exitStatus {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err != unix.EINTR {
			return exitStatus{ws: ws, ok: err == nil}
		}
	}
}

// exitStatus is the wait status of a started child; ok is false when it
// could not be collected (another waiter reaped the child).
type exitStatus struct {
	ws unix.WaitStatus
	ok bool
}

// forkExec starts path with argv and attr and returns its pid and a channel
// that receives its exit status. With a reaper the status comes from the
// reaper; without one a goroutine waits for this pid only.
func forkExec(r *reaper, path string, argv []string, attr *syscall.ProcAttr) (int, <-chan exitStatus, error) {
	out := make(chan exitStatus, 1)
	if r != nil {
		r.mu.Lock()
		if !r.stopped {
			defer r.mu.Unlock()
			pid, err := syscall.ForkExec(path, argv, attr)
			if err != nil {
				return 0, nil, err
			}
			ch := make(chan unix.WaitStatus, 1)
			r.waiters[pid] = ch
			go func() { out <- exitStatus{ws: <-ch, ok: true} }()
			return pid, out, nil
		}
		r.mu.Unlock()
	}
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	go func() { out <- waitPID(pid) }()
	return pid, out, nil
}
