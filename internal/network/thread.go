package network

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// onOwnThread runs fn in a new goroutine locked to an OS thread that ends
// with fn, and returns once fn has started. Code that moves its thread
// into another namespace or root runs there, so that no other goroutine
// ever runs on that thread. The main thread is never the one: the
// runtime parks it instead of ending it, and it is what /proc/self shows
// of the process.
func onOwnThread(fn func()) {
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with fn
		if unix.Gettid() == unix.Getpid() {
			// Held here, the main thread cannot run fn's goroutine.
			onOwnThread(fn)
			runtime.UnlockOSThread()
			close(started)
			return
		}
		close(started)
		fn()
	}()
	<-started
}
