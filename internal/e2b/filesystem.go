package e2b

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// maxListDepth bounds ListDir's depth.
const maxListDepth = 16

// entryInfo is envd's filesystem.EntryInfo in the protobuf JSON mapping.
type entryInfo struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Path          string  `json:"path"`
	Size          string  `json:"size"` // int64: a string in protobuf JSON
	Mode          uint32  `json:"mode"`
	Permissions   string  `json:"permissions"`
	Owner         string  `json:"owner"`
	Group         string  `json:"group"`
	ModifiedTime  string  `json:"modifiedTime,omitempty"`
	SymlinkTarget *string `json:"symlinkTarget,omitempty"`
}

// entryOf converts a Paddock file entry. Owner and group are not known
// to the agent's API and are reported as root.
func entryOf(e *api.FileEntry) entryInfo {
	perm, _ := strconv.ParseUint(e.Mode, 8, 32)
	out := entryInfo{Name: e.Name, Path: e.Path, Size: strconv.FormatInt(e.Size, 10), Mode: uint32(perm),
		Owner: "root", Group: "root"}
	mode := fs.FileMode(perm) & fs.ModePerm
	switch e.Type {
	case api.FileTypeFile:
		out.Type = "FILE_TYPE_FILE"
	case api.FileTypeDir:
		out.Type = "FILE_TYPE_DIRECTORY"
		mode |= fs.ModeDir
	case api.FileTypeSymlink:
		out.Type = "FILE_TYPE_SYMLINK"
		mode |= fs.ModeSymlink
	default:
		out.Type = "FILE_TYPE_UNSPECIFIED"
	}
	out.Permissions = mode.String()
	if !e.ModifiedAt.IsZero() {
		out.ModifiedTime = e.ModifiedAt.UTC().Format(time.RFC3339Nano)
	}
	if e.LinkTarget != "" {
		t := e.LinkTarget
		out.SymlinkTarget = &t
	}
	return out
}

type pathRequest struct {
	Path string `json:"path"`
}

func (s *Server) fsStat(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req pathRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	e, err := s.agent.StatFile(r.Context(), rec.ID, req.Path)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, map[string]any{"entry": entryOf(e)})
}

// fsMakeDir creates a directory and its parents; an existing path is
// already_exists (the SDK's makeDir then returns false).
func (s *Server) fsMakeDir(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req pathRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if _, err := s.agent.StatFile(r.Context(), rec.ID, req.Path); err == nil {
		writeUnaryError(w, rpcErrorf(codeAlreadyExists, "%s already exists", req.Path))
		return
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		writeUnaryError(w, err)
		return
	}
	e, err := s.agent.Mkdir(r.Context(), rec.ID, req.Path, "")
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, map[string]any{"entry": entryOf(e)})
}

// fsMove renames source to destination with mv inside the sandbox (so
// the path resolution is the sandbox's own), then stats the result.
func (s *Server) fsMove(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if req.Source == "" || req.Destination == "" {
		writeUnaryError(w, rpcErrorf(codeInvalidArgument, "source and destination are required"))
		return
	}
	if _, err := s.agent.StatFile(r.Context(), rec.ID, req.Source); err != nil {
		writeUnaryError(w, err)
		return
	}
	res, err := s.agent.Exec(r.Context(), rec.ID, &api.ExecRequest{
		Argv: []string{"mv", "-f", "--", req.Source, req.Destination}, TimeoutSeconds: 60, MaxOutputBytes: 4096})
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		writeUnaryError(w, rpcErrorf(codeFailedPrecondition, "move %s to %s: %s", req.Source, req.Destination, res.Stderr))
		return
	}
	e, err := s.agent.StatFile(r.Context(), rec.ID, req.Destination)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, map[string]any{"entry": entryOf(e)})
}

func (s *Server) fsListDir(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req struct {
		Path  string `json:"path"`
		Depth uint32 `json:"depth"`
	}
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	depth := int(min(max(req.Depth, 1), maxListDepth))
	list, err := s.agent.ListFiles(r.Context(), rec.ID, req.Path, depth)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	out := []entryInfo{}
	for i := range list.Entries {
		out = append(out, entryOf(&list.Entries[i]))
	}
	writeUnary(w, map[string]any{"entries": out})
}

func (s *Server) fsRemove(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	var req pathRequest
	if err := readUnary(w, r, &req); err != nil {
		writeUnaryError(w, err)
		return
	}
	if err := s.agent.DeleteFile(r.Context(), rec.ID, req.Path, true); err != nil {
		writeUnaryError(w, err)
		return
	}
	writeUnary(w, struct{}{})
}

// snapshot lists dir (recursively if asked) as path -> (size, mtime).
func (s *Server) snapshot(ctx context.Context, id, dir string, recursive bool) (map[string]string, error) {
	depth := 1
	if recursive {
		depth = maxListDepth
	}
	list, err := s.agent.ListFiles(ctx, id, dir, depth)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Entries))
	for _, e := range list.Entries {
		out[e.Path] = e.Type + "|" + strconv.FormatInt(e.Size, 10) + "|" + e.ModifiedAt.String()
	}
	return out, nil
}

// fsEvent is envd's FilesystemEvent.
type fsEvent struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// diff is the events that turn snapshot a into b; names are relative to
// dir.
func diff(dir string, a, b map[string]string) []fsEvent {
	var out []fsEvent
	rel := func(p string) string {
		if r, err := relPath(dir, p); err == nil {
			return r
		}
		return p
	}
	for p, v := range b {
		old, ok := a[p]
		switch {
		case !ok:
			out = append(out, fsEvent{Name: rel(p), Type: "EVENT_TYPE_CREATE"})
		case old != v:
			out = append(out, fsEvent{Name: rel(p), Type: "EVENT_TYPE_WRITE"})
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, fsEvent{Name: rel(p), Type: "EVENT_TYPE_REMOVE"})
		}
	}
	return out
}

func relPath(dir, p string) (string, error) {
	dir, p = path.Clean(dir), path.Clean(p)
	if len(p) > len(dir) && p[:len(dir)] == dir && (dir == "/" || p[len(dir)] == '/') {
		if dir == "/" {
			return p[1:], nil
		}
		return p[len(dir)+1:], nil
	}
	return "", errors.New("not below")
}
