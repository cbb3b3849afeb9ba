package store

import (
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Group commit. Every bbolt write transaction ends in two fsyncs and
// transactions run one at a time, so concurrent writers (2,000 deletes at
// once, creates from many clients) each wait for every writer ahead of
// them. Writes that arrive while a transaction commits are queued and
// committed together in the next one: a lone write commits at once, as
// before, and n concurrent writes cost about one commit instead of n.
//
// A write joined this way must leave nothing behind when it fails: its
// function returns its error before writing anything (every single-record
// operation of this package does). UpdateMany, which writes several
// records, runs in a transaction of its own.

// maxGroup bounds the writes committed in one transaction.
const maxGroup = 256

// writeGroup queues the writes waiting for the next commit.
type writeGroup struct {
	mu    sync.Mutex
	queue []*groupWrite
	busy  bool // a writer is committing the queue
	// commits counts the transactions committed (the tests read it).
	commits int
}

// groupWrite is one queued write.
type groupWrite struct {
	fn   func(*bolt.Tx) error
	err  error
	done chan struct{}
}

// write runs fn in a write transaction, possibly shared with concurrent
// writes, and returns fn's error or the commit's.
func (s *Store) write(fn func(*bolt.Tx) error) error {
	w := &groupWrite{fn: fn, done: make(chan struct{})}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.busy {
		g.mu.Unlock()
		<-w.done
		return w.err
	}
	g.busy = true
	g.mu.Unlock()
	// This writer commits until its own write is in; writes queued after
	// that are committed by a goroutine, so no caller serves others for
	// longer than its own write takes.
	for !s.commitNext(w) {
	}
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.busy = false
		g.mu.Unlock()
	} else {
		g.mu.Unlock()
		go s.drainWrites()
	}
	return w.err
}

// drainWrites commits queued writes until there are none.
func (s *Store) drainWrites() {
	g := &s.group
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		s.commitNext(nil)
	}
}

// commitNext commits up to maxGroup queued writes in one transaction and
// reports whether w was among them.
func (s *Store) commitNext(w *groupWrite) bool {
	g := &s.group
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	batch := append([]*groupWrite(nil), g.queue[:n]...)
	g.queue = append(g.queue[:0], g.queue[n:]...)
	g.commits++
	g.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range batch {
			b.err = runGrouped(tx, b.fn)
		}
		return nil
	})
	mine := false
	for _, b := range batch {
		if err != nil && b.err == nil {
			b.err = err
		}
		mine = mine || b == w
		close(b.done)
	}
	return mine
}

// runGrouped runs one write's function; a panic becomes its error, so
// that it cannot take the other writes of its transaction with it.
func runGrouped(tx *bolt.Tx, fn func(*bolt.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: write panicked: %v", r)
		}
	}()
	return fn(tx)
}
