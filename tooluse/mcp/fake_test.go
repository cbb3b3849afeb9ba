package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// fakeDaemon is a minimal in-memory paddockd: sandboxes, exec (echoes the
// command; "false" exits 1) and files.
type fakeDaemon struct {
	mu       sync.Mutex
	n        int
	boxes    map[string]*fakeBox
	srv      *httptest.Server
	creates  []api.CreateSandboxRequest // every create request
	lastExec api.ExecRequest
}

type fakeBox struct {
	sb    api.Sandbox
	files map[string][]byte
}

func newFakeDaemon(t *testing.T) (*fakeDaemon, *client.Client) {
	f := &fakeDaemon{boxes: map[string]*fakeBox{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes", f.create)
	mux.HandleFunc("GET /v1/sandboxes/{id}", f.withBox(false, func(w http.ResponseWriter, r *http.Request, b *fakeBox) {
		writeJSON(w, b.sb)
	}))
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", f.withBox(false, func(w http.ResponseWriter, r *http.Request, b *fakeBox) {
		b.sb.State, b.sb.Reason = api.StateTerminated, "deleted"
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", f.withBox(true, f.exec))
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", f.withBox(true, func(w http.ResponseWriter, r *http.Request, b *fakeBox) {
		data, _ := io.ReadAll(r.Body)
		p := r.URL.Query().Get("path")
		b.files[p] = data
		writeJSON(w, api.FileEntry{Path: p, Type: api.FileTypeFile, Size: int64(len(data))})
	}))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", f.withBox(true, func(w http.ResponseWriter, r *http.Request, b *fakeBox) {
		p := r.URL.Query().Get("path")
		data, ok := b.files[p]
		if !ok {
			writeErr(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		writeJSON(w, api.FileEntry{Path: p, Type: api.FileTypeFile, Size: int64(len(data))})
	}))
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", f.withBox(true, func(w http.ResponseWriter, r *http.Request, b *fakeBox) {
		data, ok := b.files[r.URL.Query().Get("path")]
		if !ok {
			writeErr(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		w.Write(data)
	}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f, client.New(f.srv.URL, "pdk_test")
}

func (f *fakeDaemon) create(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.creates = append(f.creates, req)
	b := &fakeBox{files: map[string][]byte{}, sb: api.Sandbox{
		ID: fmt.Sprintf("sb_%d", f.n), State: api.StateRunning, Metadata: req.Metadata, Template: req.Template,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour),
	}}
	f.boxes[b.sb.ID] = b
	writeJSON(w, b.sb)
}

// withBox runs h with the sandbox of the request under f.mu; live refuses
// sandboxes that are not running (409), as paddockd does.
func (f *fakeDaemon) withBox(live bool, h func(http.ResponseWriter, *http.Request, *fakeBox)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		b, ok := f.boxes[r.PathValue("id")]
		if !ok {
			writeErr(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		if live && b.sb.State != api.StateRunning {
			writeErr(w, http.StatusConflict, api.CodeConflict)
			return
		}
		h(w, r, b)
	}
}

func (f *fakeDaemon) exec(w http.ResponseWriter, r *http.Request, b *fakeBox) {
	var req api.ExecRequest
	json.NewDecoder(r.Body).Decode(&req)
	f.lastExec = req
	code := 0
	if req.Command == "false" {
		code = 1
	}
	writeJSON(w, api.ExecResult{ExitCode: &code, Stdout: req.Command})
}

// expire ends the sandbox id as the reaper would at the end of its lease.
func (f *fakeDaemon) expire(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.boxes[id]
	b.sb.State, b.sb.Reason, b.sb.ExpiresAt = api.StateTerminated, "expired", time.Now()
}

// live returns the running sandboxes tagged with the MCP session id.
func (f *fakeDaemon) live(session string) []api.Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Sandbox
	for _, b := range f.boxes {
		if b.sb.State == api.StateRunning && (session == "" || b.sb.Metadata[MetadataKey] == session) {
			out = append(out, b.sb)
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: code}})
}
