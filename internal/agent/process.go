package agent

import (
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

// procTable holds the agent's processes: running exec commands and
// background processes. It is bounded; exited processes stay until room
// is needed, then the oldest go first.
type procTable struct {
	mu      sync.Mutex
	max     int
	seq     uint64
	pending int // ids reserved by starts in progress
	procs   map[string]*proc
	order   []string // ids, oldest first
}

func newProcTable(max int) *procTable {
	return &procTable{max: max, procs: make(map[string]*proc)}
}

// reserve makes room for one process and returns its id.
func (t *procTable) reserve() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.procs)+t.pending >= t.max {
		i := slices.IndexFunc(t.order, func(id string) bool { return t.procs[id].finished() })
		if i < 0 {
			return "", newError(api.CodeLimitExceeded, "too many processes (at most %d)", t.max)
		}
		delete(t.procs, t.order[i])
		t.order = slices.Delete(t.order, i, i+1)
	}
	t.pending++
	t.seq++
	return "proc-" + strconv.FormatUint(t.seq, 10), nil
}

// put ends a reservation; p is nil when the start failed.
func (t *procTable) put(id string, p *proc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending--
	if p != nil {
		t.procs[id] = p
		t.order = append(t.order, id)
	}
}

func (t *procTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.procs[id]; ok {
		delete(t.procs, id)
		t.order = slices.DeleteFunc(t.order, func(x string) bool { return x == id })
	}
}

func (t *procTable) get(id string) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.procs[id]
	if !ok {
		return nil, notFound("process %s not found", id)
	}
	return p, nil
}

// live counts the processes that have not ended (each holds a shim) and
// the starts in progress.
func (t *procTable) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.pending
	for _, p := range t.procs {
		if !p.finished() {
			n++
		}
	}
	return n
}

// size counts the records and the starts in progress.
func (t *procTable) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.procs) + t.pending
}

// lastSeq is the number of the last id handed out; setSeq continues after
// seq (an agent back from hibernation never reuses an id).
func (t *procTable) lastSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

func (t *procTable) setSeq(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq = max(t.seq, seq)
}

// list returns the processes, oldest first.
func (t *procTable) list() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*proc, 0, len(t.order))
	for _, id := range t.order {
		out = append(out, t.procs[id])
	}
	return out
}

// handleStartProcess starts a background process: POST /processes.
func (s *Server) handleStartProcess(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, &req, s.execBodyLimit(), false); err != nil {
		return err
	}
	spec, err := s.execSpec(&req, true)
	if err != nil {
		return err
	}
	p, err := s.startProc(spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, p.snapshot(false))
	return nil
}

// handleListProcesses lists processes: GET /processes. Results carry
// counts and flags but not the output, to keep the answer small.
func (s *Server) handleListProcesses(w http.ResponseWriter, r *http.Request) error {
	resp := api.ListProcessesResponse{Processes: []api.Process{}}
	for _, p := range s.procs.list() {
		resp.Processes = append(resp.Processes, p.snapshot(false))
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// handleGetProcess describes one process: GET /processes/{process}.
func (s *Server) handleGetProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.procs.get(r.PathValue("process"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p.snapshot(true))
	return nil
}

// handleWaitProcess waits for a process to end, at most timeout_seconds:
// POST /processes/{process}/wait.
func (s *Server) handleWaitProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.procs.get(r.PathValue("process"))
	if err != nil {
		return err
	}
	secs := float64(api.DefaultWaitTimeoutSeconds)
	if q := r.URL.Query().Get("timeout_seconds"); q != "" {
		secs, err = strconv.ParseFloat(q, 64)
		if err != nil || math.IsNaN(secs) || secs < 0 || secs > api.MaxWaitTimeoutSeconds {
			return badRequest("timeout_seconds must be a number between 0 and %d", api.MaxWaitTimeoutSeconds)
		}
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-r.Context().Done():
		return r.Context().Err()
	}
	writeJSON(w, http.StatusOK, p.snapshot(true))
	return nil
}

// handleProcessOutput streams a process's output as NDJSON events:
// GET /processes/{process}/output.
func (s *Server) handleProcessOutput(w http.ResponseWriter, r *http.Request) error {
	p, err := s.procs.get(r.PathValue("process"))
	if err != nil {
		return err
	}
	return streamEvents(r.Context(), w, p.out, nil)
}

// handleProcessStdin writes the raw body to a process's stdin:
// POST /processes/{process}/stdin?eof=true.
func (s *Server) handleProcessStdin(w http.ResponseWriter, r *http.Request) error {
	p, err := s.procs.get(r.PathValue("process"))
	if err != nil {
		return err
	}
	eof, err := boolParam(r, "eof")
	if err != nil {
		return err
	}
	if r.ContentLength > s.cfg.MaxStdinBytes {
		return tooLarge("body larger than %d bytes", s.cfg.MaxStdinBytes)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxStdinBytes))
	if err != nil {
		return err
	}
	if err := p.writeStdin(r.Context(), data, eof); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleKillProcess signals a process: POST /processes/{process}/kill.
func (s *Server) handleKillProcess(w http.ResponseWriter, r *http.Request) error {
	p, err := s.procs.get(r.PathValue("process"))
	if err != nil {
		return err
	}
	var req api.SignalRequest
	if err := decodeJSON(w, r, &req, maxJSONBytes, true); err != nil {
		return err
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		return err
	}
	if err := p.signal(sig, false); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleForgetProcess drops the record of a process that ended, with its
// output: DELETE /processes/{process}. The daemon's E2B endpoint forgets
// each process it relayed to its end (envd keeps none), so that the
// record does not keep the agent from hibernating. A running process is a
// conflict.
func (s *Server) handleForgetProcess(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("process")
	p, err := s.procs.get(id)
	if err != nil {
		return err
	}
	if !p.finished() {
		return conflict("process %s is running; kill it first", id)
	}
	s.procs.remove(id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// parseSignal accepts "SIGTERM", "TERM", "term" or "15"; empty is SIGKILL.
func parseSignal(name string) (unix.Signal, error) {
	if name == "" {
		return sigKill, nil
	}
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > 64 {
			return 0, badRequest("signal %q out of range", name)
		}
		return unix.Signal(n), nil
	}
	upper := strings.ToUpper(name)
	if !strings.HasPrefix(upper, "SIG") {
		upper = "SIG" + upper
	}
	if sig := unix.SignalNum(upper); sig != 0 {
		return sig, nil
	}
	return 0, badRequest("unknown signal %q", name)
}

// boolParam parses an optional boolean query parameter.
func boolParam(r *http.Request, name string) (bool, error) {
	q := r.URL.Query().Get(name)
	if q == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(q)
	if err != nil {
		return false, badRequest("%s must be true or false", name)
	}
	return b, nil
}
