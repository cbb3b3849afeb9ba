package agent

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

// stream names one output stream of a command.
type stream uint8

const (
	streamStdout stream = iota
	streamStderr
)

func (s stream) eventType() string {
	if s == streamStderr {
		return api.EventStderr
	}
	return api.EventStdout
}

const (
	// maxChunkBytes is how large a chunk grows by coalescing writes.
	maxChunkBytes = 64 << 10
	// smallChunkBytes is how large a chunk grows by reallocation.
	smallChunkBytes = 4 << 10
	// maxChunks bounds the bookkeeping of output that alternates between
	// the streams in tiny writes; output past it is dropped as truncated.
	maxChunks = 1 << 16
	// readBufBytes is the size of one read from an output pipe.
	readBufBytes = 32 << 10
)

// chunk is a run of output of one stream, in arrival order.
type chunk struct {
	s    stream
	data []byte // only ever appended to
}

// outputLog keeps the capped output of one command in arrival order and
// its result, and lets any number of followers replay it and wait for more.
type outputLog struct {
	limit int64     // bytes kept per stream
	start api.Event // the start event

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	chunks  []chunk
	total   [2]int64
	kept    [2]int64
	trunc   [2]bool
	result  *api.ExecResult // set by finish; Stdout and Stderr empty
	ended   time.Time
}

func newOutputLog(limit int64, start api.Event) *outputLog {
	return &outputLog{limit: limit, start: start, changed: make(chan struct{})}
}

// write records p as output of s. Bytes past the cap are counted and
// dropped; after finish everything is dropped.
func (o *outputLog) write(s stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.result != nil {
		return
	}
	o.total[s] += int64(len(p))
	if room := o.limit - o.kept[s]; int64(len(p)) > room {
		p = p[:max(room, 0)]
		o.trunc[s] = true
	}
	if len(p) == 0 {
		return
	}
	// A chunk grows in place while it has room; past smallChunkBytes it is
	// never copied to grow: a full chunk is followed by a new one twice
	// its size (up to maxChunkBytes), so that large output costs the kept
	// bytes plus at most one chunk's spare room, and leaves no garbage.
	n := len(o.chunks)
	switch last := len(o.chunks) - 1; {
	case n > 0 && o.chunks[last].s == s && (len(p) <= cap(o.chunks[last].data)-len(o.chunks[last].data) ||
		len(o.chunks[last].data)+len(p) <= smallChunkBytes):
		o.chunks[last].data = append(o.chunks[last].data, p...)
	case n >= maxChunks:
		o.trunc[s] = true
		return
	default:
		size := len(p)
		if n > 0 && o.chunks[last].s == s {
			size = max(size, min(2*cap(o.chunks[last].data), maxChunkBytes))
		}
		o.chunks = append(o.chunks, chunk{s: s, data: append(make([]byte, 0, size), p...)})
	}
	o.kept[s] += int64(len(p))
	o.notifyLocked()
}

func (o *outputLog) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// finish freezes the output and records res, completing it with the byte
// counts and truncation flags.
func (o *outputLog) finish(res api.ExecResult, ended time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	res.Stdout, res.Stderr = "", ""
	res.StdoutBytes, res.StderrBytes = o.total[streamStdout], o.total[streamStderr]
	res.StdoutTruncated, res.StderrTruncated = o.trunc[streamStdout], o.trunc[streamStderr]
	o.result = &res
	o.ended = ended
	o.notifyLocked()
}

// resultCopy returns a copy of the result, nil while the command runs.
// With withOutput the kept stdout and stderr are filled in.
func (o *outputLog) resultCopy(withOutput bool) (*api.ExecResult, time.Time) {
	o.mu.Lock()
	if o.result == nil {
		o.mu.Unlock()
		return nil, time.Time{}
	}
	res, ended := *o.result, o.ended
	chunks := o.chunks // frozen once result is set
	o.mu.Unlock()
	if withOutput {
		res.Stdout, res.Stderr = joinChunks(chunks, streamStdout), joinChunks(chunks, streamStderr)
	}
	return &res, ended
}

// keptBytes is the output kept of both streams.
func (o *outputLog) keptBytes() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kept[streamStdout] + o.kept[streamStderr]
}

// frozen returns the result and the kept output, nil while the command
// runs. The chunks are never written again once the result is set.
func (o *outputLog) frozen() (*api.ExecResult, []chunk) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.result == nil {
		return nil, nil
	}
	res := *o.result
	return &res, o.chunks
}

func joinChunks(chunks []chunk, s stream) string {
	n := 0
	for _, c := range chunks {
		if c.s == s {
			n += len(c.data)
		}
	}
	b := make([]byte, 0, n)
	for _, c := range chunks {
		if c.s == s {
			b = append(b, c.data...)
		}
	}
	return string(b)
}

// follow emits the start event, the output so far, live output and the
// exit event, in that order. It returns nil after the exit event, or the
// error of emit or ctx.
func (o *outputLog) follow(ctx context.Context, emit func(api.Event) error) error {
	start := o.start
	if err := emit(start); err != nil {
		return err
	}
	i, off := 0, 0
	for {
		var evs []api.Event
		o.mu.Lock()
		for i < len(o.chunks) {
			c := o.chunks[i]
			if off < len(c.data) {
				// Bytes below len are never written again, so the slice
				// stays valid outside the lock.
				evs = append(evs, api.Event{Type: c.s.eventType(), ProcessID: start.ProcessID, Data: c.data[off:len(c.data):len(c.data)]})
				off = len(c.data)
			}
			if i == len(o.chunks)-1 {
				break
			}
			i, off = i+1, 0
		}
		res, ended, changed := o.result, o.ended, o.changed
		o.mu.Unlock()
		for _, ev := range evs {
			if err := emit(ev); err != nil {
				return err
			}
		}
		if res != nil {
			r := *res
			return emit(api.Event{Type: api.EventExit, ProcessID: start.ProcessID, ExecResult: &r, Time: &ended})
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// copyOutput reads r into o until EOF, then closes r and calls done. It
// keeps reading after o is finished (discarding), so that background
// processes holding the pipe never get SIGPIPE.
func copyOutput(o *outputLog, s stream, r *os.File, busy *atomic.Bool, done func()) {
	defer done()
	defer r.Close()
	buf := make([]byte, readBufBytes)
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	for {
		// busy is set before the read(2) that takes bytes out of the
		// pipe and cleared once they are kept, so that drainOutput
		// never sees them in neither place (the pipe empty, the copier
		// not busy). While parked waiting for data it is clear.
		var n int
		var rerr error
		cerr := rc.Read(func(fd uintptr) bool {
			busy.Store(true)
			n, rerr = unix.Read(int(fd), buf)
			if rerr == unix.EAGAIN {
				busy.Store(false)
				return false // park until the pipe is readable
			}
			return true
		})
		if n > 0 {
			o.write(s, buf[:n])
		}
		busy.Store(false)
		if rerr == unix.EINTR {
			continue
		}
		if cerr != nil || rerr != nil || n == 0 {
			return // EOF (n == 0), or the pipe broke
		}
	}
}

// drainOutput waits, once the command has exited, for its output to be
// kept: until both pipes reach EOF, or — when a background descendant
// still holds a pipe open — until nothing is left unread in them and no
// copier holds read bytes, after at least 100 ms and at most 2 s. A busy
// agent (many execs at once) may not yet have read what the command wrote
// before it exited; a fixed wait would drop it.
func drainOutput(eof <-chan struct{}, pipes [2]*os.File, busy *[2]atomic.Bool) {
	select {
	case <-eof:
		return
	case <-time.After(100 * time.Millisecond):
	}
	deadline := time.After(2 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if pipeUnread(pipes[0])+pipeUnread(pipes[1]) == 0 && !busy[0].Load() && !busy[1].Load() {
			return
		}
		select {
		case <-eof:
			return
		case <-deadline:
			return
		case <-tick.C:
		}
	}
}

// pipeUnread is the number of bytes waiting in the pipe f (0 once it is
// closed or on error).
func pipeUnread(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	if cerr := rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	}); cerr != nil || err != nil {
		return 0
	}
	return n
}
