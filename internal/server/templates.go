package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

// Limits on template requests.
const (
	// maxTemplateBody bounds a JSON create request (recipes and contexts
	// carry file contents in base64).
	maxTemplateBody = 96 << 20
	// maxContextBytes and maxContextFiles bound a tar build context.
	maxContextBytes = 64 << 20
	maxContextFiles = 20000
	// maxContextTar bounds the tar stream of a context (headers and
	// padding on top of the contents).
	maxContextTar = maxContextBytes + maxContextFiles*1024 + (1 << 20)
)

func (s *Server) templates() (*catalog.Builder, error) {
	t := s.cfg.Templates
	if t == nil {
		return nil, fmt.Errorf("%w: templates are not enabled on this daemon", sandbox.ErrNotSupported)
	}
	return t, nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, owner string) error {
	t, err := s.templates()
	if err != nil {
		return err
	}
	out := api.ListTemplatesResponse{Templates: []api.Template{}}
	for _, tpl := range t.List(r.Context(), owner) {
		out.Templates = append(out.Templates, templateAPI(&tpl))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTemplate(w http.ResponseWriter, r *http.Request, owner string) error {
	t, err := s.templates()
	if err != nil {
		return err
	}
	tpl, err := t.Get(r.Context(), owner, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateAPI(tpl))
	return nil
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, owner string) error {
	t, err := s.templates()
	if err != nil {
		return err
	}
	err = t.Delete(r.Context(), owner, r.PathValue("name"))
	// A sandbox deleted a moment ago may still hold the template while its
	// cleanup, which follows the delete's answer, runs: wait for that.
	if errors.Is(err, sandbox.ErrConflict) && s.mgr.AwaitCleanups(r.Context()) {
		err = t.Delete(r.Context(), owner, r.PathValue("name"))
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createTemplate serves POST /v1/templates: a JSON CreateTemplateRequest,
// or (Content-Type application/x-tar) a build context holding a
// Dockerfile, with name, dockerfile, build_arg, no_cache and
// step_timeout_seconds as query parameters. With Accept:
// application/x-ndjson the build's progress streams as BuildEvents.
func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request, owner string) error {
	t, err := s.templates()
	if err != nil {
		return err
	}
	if err := s.templateQuota(r, t, owner); err != nil {
		return err
	}
	var req api.CreateTemplateRequest
	var bc template.BuildContext
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/x-tar", "application/octet-stream":
		q := r.URL.Query()
		req.Name = q.Get("name")
		df := q.Get("dockerfile")
		if df == "" {
			df = "Dockerfile"
		}
		req.NoCache, _ = strconv.ParseBool(q.Get("no_cache"))
		if v := q.Get("step_timeout_seconds"); v != "" {
			if req.StepTimeoutSeconds, err = strconv.ParseInt(v, 10, 64); err != nil {
				return fmt.Errorf("%w: step_timeout_seconds must be a number", sandbox.ErrInvalid)
			}
		}
		for _, kv := range q["build_arg"] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("%w: build_arg must be NAME=VALUE", sandbox.ErrInvalid)
			}
			if req.BuildArgs == nil {
				req.BuildArgs = map[string]string{}
			}
			req.BuildArgs[k] = v
		}
		body, release, err := s.templateBodies.read(w, r, owner, maxContextTar)
		if err != nil {
			return err
		}
		bc, err = template.ReadContextTar(bytes.NewReader(body), maxContextBytes, maxContextFiles)
		release()
		if err != nil {
			return templateErr(err)
		}
		f, ok := bc[strings.TrimPrefix(df, "./")]
		if !ok {
			return fmt.Errorf("%w: the build context has no %s", sandbox.ErrInvalid, df)
		}
		req.Dockerfile = string(f.Data)
		if req.Dockerfile == "" {
			return fmt.Errorf("%w: %s is empty", sandbox.ErrInvalid, df)
		}
	default:
		body, release, err := s.templateBodies.read(w, r, owner, maxTemplateBody)
		if err != nil {
			return err
		}
		err = decodeFrom(bytes.NewReader(body), &req)
		release()
		if err != nil {
			return err
		}
	}
	if !strings.Contains(r.Header.Get("Accept"), api.ContentTypeNDJSON) {
		tpl, err := t.CreateTemplate(r.Context(), owner, buildRequest(req), bc, nil)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, templateAPI(tpl))
		return nil
	}
	s.streamBuild(w, r, t, owner, buildRequest(req), bc)
	return nil
}

// streamBuild runs a build, answering with its progress as NDJSON
// BuildEvents; an error ends the stream as an error event.
func (s *Server) streamBuild(w http.ResponseWriter, r *http.Request, t *catalog.Builder, owner string, req catalog.BuildRequest, bc template.BuildContext) {
	w.Header().Set("Content-Type", api.ContentTypeNDJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	emit := func(ev api.BuildEvent) {
		enc.Encode(ev)
		rc.Flush()
	}
	progress := func(ev catalog.BuildEvent) { emit(buildEventAPI(ev)) }
	if _, err := t.CreateTemplate(r.Context(), owner, req, bc, progress); err != nil {
		code, st := classify(err)
		if st >= 500 {
			s.log.Error("template build failed", "err", err)
		}
		emit(api.BuildEvent{Type: api.BuildEventError, Error: &api.ErrorBody{Code: code, Message: err.Error()}})
	}
}

// templateErr maps the build-context errors of package template.
func templateErr(err error) error {
	switch {
	case errors.Is(err, template.ErrLimit):
		return fmt.Errorf("%w: %v", sandbox.ErrTooLarge, err)
	case errors.Is(err, template.ErrInvalid):
		return fmt.Errorf("%w: %v", sandbox.ErrInvalid, err)
	}
	return err
}

func (s *Server) snapshotSandbox(w http.ResponseWriter, r *http.Request, owner string) error {
	t, err := s.templates()
	if err != nil {
		return err
	}
	var req api.SnapshotRequest
	if err := decode(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	if err := s.templateQuota(r, t, owner); err != nil {
		return err
	}
	tpl, err := t.Snapshot(r.Context(), owner, r.PathValue("id"), req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, templateAPI(tpl))
	return nil
}

// templateQuota refuses a build or snapshot when owner's templates
// already take Config.TemplateBytesPerKey (their layers as charged, a
// layer shared by two templates counted twice).
func (s *Server) templateQuota(r *http.Request, t *catalog.Builder, owner string) error {
	limit := s.cfg.TemplateBytesPerKey
	if limit <= 0 {
		return nil
	}
	var used int64
	for _, tpl := range t.List(r.Context(), owner) {
		if !tpl.Shared && tpl.Owner == owner {
			used += tpl.Size
		}
	}
	if used >= limit {
		return fmt.Errorf("%w: this key's templates take %d bytes, the per-key quota is %d (--template-bytes-per-key); delete some", template.ErrBudget, used, limit)
	}
	return nil
}
