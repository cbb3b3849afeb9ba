package network

import (
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOnOwnThread: fn runs on a thread that is not the main thread, and
// that thread ends with fn.
func TestOnOwnThread(t *testing.T) {
	tids := make(chan int, 1)
	release := make(chan struct{})
	onOwnThread(func() {
		tids <- unix.Gettid()
		<-release
	})
	tid := <-tids
	if tid == unix.Getpid() {
		t.Fatal("fn ran on the main thread")
	}
	task := "/proc/self/task/" + strconv.Itoa(tid)
	if _, err := os.Stat(task); err != nil {
		t.Fatalf("fn's thread %d: %v", tid, err)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still exists after fn returned", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
