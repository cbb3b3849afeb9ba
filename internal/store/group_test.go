package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	bolt "go.etcd.io/bbolt"
)

// TestGroupCommit: writes queued while a transaction commits go into one
// next transaction together; a write that fails or panics there fails
// alone, and every other write of its transaction is kept, also after a
// reopen.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := range n {
		if err := s.Put(&Record{ID: fmt.Sprint("r", i), Owner: "k", State: sandbox.Running}); err != nil {
			t.Fatal(err)
		}
	}
	s.group.mu.Lock()
	before := s.group.commits
	s.group.mu.Unlock()
	// The first write holds its transaction until n others are queued.
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.write(func(tx *bolt.Tx) error {
			<-release
			return tx.Bucket(bucketSandboxes).Put([]byte("first"), []byte(`{"id":"first"}`))
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		busy := s.group.busy
		s.group.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first write never started committing")
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint("r", i)
			_, errs[i] = s.Update(id, func(r *Record) error {
				switch i {
				case 3:
					return errors.New("refused")
				case 5:
					panic("boom")
				}
				r.State = sandbox.Terminated
				return nil
			})
		})
	}
	waitQueue(t, s, n)
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		switch {
		case i == 3 && (err == nil || err.Error() != "refused"):
			t.Errorf("write 3: %v, want its own error", err)
		case i == 5 && (err == nil || !strings.Contains(err.Error(), "panicked: boom")):
			t.Errorf("write 5: %v, want the panic as its error", err)
		case i != 3 && i != 5 && err != nil:
			t.Errorf("write %d: %v", i, err)
		}
	}
	s.group.mu.Lock()
	commits := s.group.commits
	s.group.mu.Unlock()
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		r, err := s.Get(fmt.Sprint("r", i))
		want := sandbox.Terminated
		if i == 3 || i == 5 {
			want = sandbox.Running
		}
		if err != nil || r.State != want {
			t.Errorf("r%d after reopen: %+v %v, want %s", i, r, err, want)
		}
	}
	if _, err := s.Get("first"); err != nil {
		t.Errorf("first: %v", err)
	}
	// The first write's transaction, then one for the n queued behind it.
	if got := commits - before; got != 2 {
		t.Errorf("%d transactions for 1 + %d writes, want 2", got, n)
	}
}

// waitQueue waits until n writes are queued behind the one committing.
func waitQueue(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.group.mu.Lock()
		q := len(s.group.queue)
		s.group.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}
