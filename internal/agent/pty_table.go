package agent

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddock-sandbox/paddock/api"
)

// ptyTable holds the open terminals, at most max at once.
type ptyTable struct {
	mu   sync.Mutex
	max  int
	next int
	m    map[string]*ptyProc // nil value: reserved, starting
}

func newPTYTable(max int) *ptyTable { return &ptyTable{max: max, m: map[string]*ptyProc{}} }

// reserve takes a slot and returns its id ("t_N").
func (t *ptyTable) reserve() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.max {
		return "", newError(api.CodeLimitExceeded, "at most %d terminals at once in a sandbox", t.max)
	}
	t.next++
	id := "t_" + strconv.Itoa(t.next)
	t.m[id] = nil
	return id, nil
}

func (t *ptyTable) put(id string, p *ptyProc) {
	t.mu.Lock()
	t.m[id] = p
	t.mu.Unlock()
}

func (t *ptyTable) remove(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

func (t *ptyTable) get(id string) (*ptyProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[id]; p != nil {
		return p, nil
	}
	return nil, notFound("no terminal %s", id)
}

func (t *ptyTable) list() []*ptyProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*ptyProc, 0, len(t.m))
	for _, p := range t.m {
		if p != nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *ptyProc) int {
		if c := len(a.id) - len(b.id); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out
}

// handleListPTYs lists the open terminals (GET /pty/list).
func (s *Server) handleListPTYs(w http.ResponseWriter, r *http.Request) error {
	resp := api.ListPtysResponse{Ptys: []api.PtyInfo{}}
	for _, p := range s.ptys.list() {
		resp.Ptys = append(resp.Ptys, p.info())
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// handleKillPTY kills a terminal's command (POST /pty/{pty}/kill); its
// WebSocket then sends the exit message.
func (s *Server) handleKillPTY(w http.ResponseWriter, r *http.Request) error {
	p, err := s.ptys.get(r.PathValue("pty"))
	if err != nil {
		return err
	}
	p.kill()
	w.WriteHeader(http.StatusNoContent)
	return nil
}
