package kernel

import (
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Context is one code context: an interpreter and its execution count.
type Context struct {
	m       *Manager
	id      string
	lang    *language
	dir     string
	env     []string
	created time.Time

	mu     sync.Mutex
	proc   *process // nil after a failed restart; the next cell starts one
	count  int
	run    *cellRun // the running cell (or restart), nil when idle
	closed bool
}

// cellRun is the control channel of a running cell.
type cellRun struct {
	interrupt chan struct{} // buffered: a request to interrupt
	restart   chan struct{} // buffered: a request to restart
	done      chan struct{} // closed when the cell ended
}

func newCellRun() *cellRun {
	return &cellRun{interrupt: make(chan struct{}, 1), restart: make(chan struct{}, 1), done: make(chan struct{})}
}

func signalRun(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// describe is the API view of c.
func (c *Context) describe() api.CodeContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := api.CodeContext{ID: c.id, Language: c.lang.name, Cwd: c.dir, ExecutionCount: c.count, Busy: c.run != nil, CreatedAt: c.created}
	if c.proc != nil {
		cc.PID = c.proc.pid
	}
	return cc
}

// begin claims c for one cell or restart, starting an interpreter if it
// has none.
func (c *Context) begin() (*cellRun, *process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return nil, nil, errorf(api.CodeNotFound, "code context %s was deleted", c.id)
	case c.run != nil:
		return nil, nil, errorf(api.CodeConflict, "code context %s is busy running a cell", c.id)
	}
	if c.proc == nil {
		p, err := c.m.start(c.lang, c.dir, c.env)
		if err != nil {
			return nil, nil, err
		}
		c.proc, c.count = p, 0
	}
	c.run = newCellRun()
	return c.run, c.proc, nil
}

// end releases c after begin.
func (c *Context) end(r *cellRun) {
	c.mu.Lock()
	c.run = nil
	c.mu.Unlock()
	close(r.done)
}

// replace kills old and starts a fresh interpreter; the caller holds the
// run slot. On failure c has no interpreter until the next cell.
func (c *Context) replace(old *process) error {
	old.kill(5 * time.Second)
	go old.drain()
	c.mu.Lock()
	closed := c.closed
	c.proc, c.count = nil, 0
	c.mu.Unlock()
	if closed {
		return nil
	}
	p, err := c.m.start(c.lang, c.dir, c.env)
	if err != nil {
		c.m.cfg.Log.Warn("restart code context", "context", c.id, "err", err)
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		go func() { p.kill(5 * time.Second); p.drain() }()
		return nil
	}
	c.proc = p
	return nil
}

// restart replaces the interpreter; a running cell ends restarted.
func (c *Context) restart() error {
	for {
		r, p, err := c.begin()
		if err == nil {
			defer c.end(r)
			return c.replace(p)
		}
		c.mu.Lock()
		busy := c.run
		c.mu.Unlock()
		if busy == nil {
			return err
		}
		signalRun(busy.restart)
		<-busy.done
	}
}

// interrupt asks the running cell, if any, to stop.
func (c *Context) interrupt() {
	c.mu.Lock()
	r := c.run
	c.mu.Unlock()
	if r != nil {
		signalRun(r.interrupt)
	}
}

// close kills the interpreter for good.
func (c *Context) close() {
	c.mu.Lock()
	c.closed = true
	r, p := c.run, c.proc
	c.mu.Unlock()
	if r != nil {
		signalRun(r.restart) // the cell ends; closed stops the restart
		<-r.done
		return
	}
	if p != nil {
		p.kill(5 * time.Second)
		go p.drain()
	}
}
