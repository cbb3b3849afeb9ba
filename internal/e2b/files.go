package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// maxUploadParts bounds the files of one multipart upload.
const maxUploadParts = 64

// validSignature checks a /files URL signed by the SDK (uploadUrl,
// downloadUrl): "v1_" + base64(sha256(path:operation:user:token[:exp]))
// without padding, with an optional expiry in unix seconds.
func (s *Server) validSignature(r *http.Request, id string) bool {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	raw := fmt.Sprintf("%s:%s:%s:%s", q.Get("path"), op, q.Get("username"), s.accessToken(id))
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	return equalToken(sig, want)
}

// filesError writes envd's /files error body.
func filesError(w http.ResponseWriter, err error) {
	st := apiStatus(err)
	if st == http.StatusConflict {
		st = http.StatusBadRequest
	}
	writeJSON(w, st, map[string]any{"code": st, "message": err.Error()})
}

// download serves GET /files?path=: the file's bytes.
func (s *Server) download(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	p := r.URL.Query().Get("path")
	if p == "" {
		filesError(w, fmt.Errorf("%w: path is required", sandbox.ErrInvalid))
		return
	}
	f, err := s.agent.ReadFile(r.Context(), rec.ID, p, s.cfg.MaxFileBytes)
	if err != nil {
		filesError(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if f.Size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	io.Copy(w, io.LimitReader(f, s.cfg.MaxFileBytes))
}

// upload serves POST /files: a multipart form of files (each part's file
// name is its path when ?path= is absent) or an application/octet-stream
// body written to ?path=. Parent directories are created.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, rec *store.Record) {
	if r.Header.Get("Content-Encoding") != "" && r.Header.Get("Content-Encoding") != "identity" {
		filesError(w, fmt.Errorf("%w: compressed uploads are not supported", sandbox.ErrNotSupported))
		return
	}
	target := r.URL.Query().Get("path")
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var entries []entryOut
	switch ct {
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for n := 0; ; n++ {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				filesError(w, fmt.Errorf("%w: multipart body: %v", sandbox.ErrInvalid, err))
				return
			}
			if n >= maxUploadParts {
				filesError(w, fmt.Errorf("%w: at most %d files per upload", sandbox.ErrInvalid, maxUploadParts))
				return
			}
			if part.FormName() != "file" {
				continue
			}
			p := target
			if p == "" {
				// The part's file name is the path (Part.FileName would
				// keep only its last element).
				_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				p = dp["filename"]
			}
			e, err := s.writeOne(r, rec.ID, p, part, -1)
			if err != nil {
				filesError(w, err)
				return
			}
			entries = append(entries, e)
		}
	default:
		e, err := s.writeOne(r, rec.ID, target, r.Body, r.ContentLength)
		if err != nil {
			filesError(w, err)
			return
		}
		entries = append(entries, e)
	}
	if entries == nil {
		entries = []entryOut{}
	}
	writeJSON(w, http.StatusOK, entries)
}

// entryOut is envd's EntryInfo of the /files answer.
type entryOut struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s *Server) writeOne(r *http.Request, id, p string, body io.Reader, size int64) (entryOut, error) {
	if p == "" {
		return entryOut{}, fmt.Errorf("%w: path is required", sandbox.ErrInvalid)
	}
	if size > s.cfg.MaxFileBytes {
		return entryOut{}, fmt.Errorf("%w: file larger than %d bytes", sandbox.ErrTooLarge, s.cfg.MaxFileBytes)
	}
	if size < 0 {
		body = &capReader{r: body, n: s.cfg.MaxFileBytes}
	}
	e, err := s.agent.WriteFile(r.Context(), id, p, "", body, size)
	if err != nil {
		return entryOut{}, err
	}
	typ := "file"
	if e.Type == api.FileTypeDir {
		typ = "directory"
	}
	return entryOut{Path: e.Path, Name: e.Name, Type: typ}, nil
}

// capReader fails once more than n bytes are read.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, fmt.Errorf("%w: file larger than the upload limit", sandbox.ErrTooLarge)
	}
	return n, err
}
