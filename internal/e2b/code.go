package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/store"
)

// CodePort is the port @e2b/code-interpreter addresses its kernel server
// on; it is answered here from Paddock's code contexts.
const CodePort = 49999

// headerWait is how long execute waits for the agent's first answer
// before committing its own headers.
const headerWait = 300 * time.Millisecond

// codeLanguages maps the code interpreter's language names to Paddock's.
var codeLanguages = map[string]string{
	"": "", "python": api.LanguagePython, "python3": api.LanguagePython,
	"js": api.LanguageJavascript, "javascript": api.LanguageJavascript,
	"bash": api.LanguageBash, "sh": api.LanguageBash,
}

// mimeKeys maps a result's MIME types to the code interpreter's fields.
var mimeKeys = map[string]string{
	"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
	"image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
	"application/json": "json", "application/javascript": "javascript",
}

// codeInterpreter serves the code interpreter's routes for sandbox rec:
// POST /execute (NDJSON events), and /contexts (create, list, delete,
// restart). /execute needs the envd access token (the SDK sends it); the
// context routes, which the SDK calls without it, follow the sandbox's
// port rule (public unless created with allowPublicTraffic false).
func (s *Server) codeInterpreter(w http.ResponseWriter, r *http.Request, id string) {
	tokenOK := equalToken(r.Header.Get("X-Access-Token"), s.accessToken(id))
	rec, err := s.mgr.RunningAny(r.Context(), id)
	if err != nil {
		sandboxGone(w, id, err)
		return
	}
	public := rec.Metadata[metaPrivate] != "true" || equalToken(r.Header.Get("E2b-Traffic-Access-Token"), s.trafficToken(id))
	path := r.URL.Path
	if !tokenOK && (path == "/execute" || !public) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": http.StatusUnauthorized,
			"message": "missing or wrong X-Access-Token (the envdAccessToken of create or connect)"})
		return
	}
	var cerr error
	switch {
	case path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	case path == "/execute" && r.Method == http.MethodPost:
		cerr = s.execute(w, r, rec)
	case path == "/contexts" && r.Method == http.MethodPost:
		cerr = s.createContext(w, r, rec)
	case path == "/contexts" && r.Method == http.MethodGet:
		cerr = s.listContexts(w, r, rec)
	case strings.HasPrefix(path, "/contexts/"):
		cerr = s.contextOp(w, r, rec, strings.TrimPrefix(path, "/contexts/"))
	default:
		cerr = fmt.Errorf("%w: %s %s", sandbox.ErrNotFound, r.Method, path)
	}
	if cerr != nil {
		filesError(w, cerr)
	}
}

func codeLanguage(lang string) (string, error) {
	l, ok := codeLanguages[strings.ToLower(lang)]
	if !ok {
		return "", fmt.Errorf("%w: language %q is not available (python, javascript, bash)", sandbox.ErrInvalid, lang)
	}
	return l, nil
}

// execute runs a cell and streams the code interpreter's events.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	var b struct {
		Code      string            `json:"code"`
		ContextID string            `json:"context_id"`
		Language  string            `json:"language"`
		EnvVars   map[string]string `json:"env_vars"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	lang, err := codeLanguage(b.Language)
	if err != nil {
		return err
	}
	// The agent answers a cell's headers with its first event, which may
	// be long; the SDK starts its timeoutMs timer only once it has ours.
	// So an error the agent returns at once (an unknown context) is a
	// status, and past headerWait the answer is committed and later
	// errors are error events.
	type started struct {
		evs *agent.CodeEvents
		err error
	}
	ch := make(chan started, 1)
	go func() {
		evs, err := s.agent.RunCodeStream(r.Context(), rec.ID, &api.CodeRequest{Code: b.Code, Language: lang,
			ContextID: b.ContextID, Env: b.EnvVars, TimeoutSeconds: api.MaxExecTimeoutSeconds})
		ch <- started{evs, err}
	}()
	var st started
	committed := false
	select {
	case st = <-ch:
	case <-time.After(headerWait):
	}
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	if st.evs == nil && st.err == nil {
		committed = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		st = <-ch
	}
	if st.err != nil {
		if !committed {
			return st.err
		}
		enc.Encode(map[string]any{"type": "error", "name": "SandboxError", "value": st.err.Error(), "traceback": ""})
		return nil
	}
	evs := st.evs
	defer evs.Close()
	if !committed {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	}
	for {
		ev, err := evs.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				enc.Encode(map[string]any{"type": "error", "name": "SandboxError", "value": err.Error(), "traceback": ""})
			}
			return nil
		}
		var out map[string]any
		switch ev.Type {
		case api.CodeEventStdout, api.CodeEventStderr:
			out = map[string]any{"type": ev.Type, "text": ev.Text}
		case api.CodeEventResult:
			if ev.Result == nil {
				continue
			}
			out = resultOf(ev.Result)
		case api.CodeEventError:
			if ev.Error == nil {
				continue
			}
			out = map[string]any{"type": "error", "name": ev.Error.Name, "value": ev.Error.Value, "traceback": ev.Error.Traceback}
		case api.CodeEventEnd:
			if x := ev.Execution; x != nil {
				if x.TimedOut {
					enc.Encode(map[string]any{"type": "error", "name": "TimeoutError", "value": "the cell ran past its timeout and was interrupted", "traceback": ""})
				}
				enc.Encode(map[string]any{"type": "number_of_executions", "execution_count": x.ExecutionCount})
			}
			out = map[string]any{"type": "end_of_execution"}
		default:
			continue
		}
		if err := enc.Encode(out); err != nil {
			return nil
		}
		rc.Flush()
	}
}

// resultOf is the code interpreter's result message of a Paddock result.
func resultOf(res *api.CodeResult) map[string]any {
	out := map[string]any{"type": "result", "is_main_result": res.IsMainResult}
	for mime, v := range res.Data {
		key, ok := mimeKeys[mime]
		if !ok {
			out[mime] = v
			continue
		}
		if key == "json" {
			var j any
			if json.Unmarshal([]byte(v), &j) == nil {
				out[key] = j
				continue
			}
		}
		out[key] = v
	}
	return out
}

// contextOf is the code interpreter's Context of a Paddock code context.
func contextOf(c *api.CodeContext) map[string]any {
	return map[string]any{"id": c.ID, "language": c.Language, "cwd": c.Cwd}
}

func (s *Server) createContext(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	var b struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := decodeBody(w, r, &b); err != nil {
		return err
	}
	lang, err := codeLanguage(b.Language)
	if err != nil {
		return err
	}
	c, err := s.agent.CreateCodeContext(r.Context(), rec.ID, &api.CodeContextRequest{Language: lang, Cwd: b.Cwd})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, contextOf(c))
	return nil
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	list, err := s.agent.ListCodeContexts(r.Context(), rec.ID)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for i := range list.Contexts {
		out = append(out, contextOf(&list.Contexts[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// contextOp serves DELETE /contexts/{id} and POST /contexts/{id}/restart.
func (s *Server) contextOp(w http.ResponseWriter, r *http.Request, rec *store.Record, rest string) error {
	ctxID, op, _ := strings.Cut(rest, "/")
	switch {
	case ctxID == "":
		return fmt.Errorf("%w: context id required", sandbox.ErrInvalid)
	case op == "" && r.Method == http.MethodDelete:
		if err := s.agent.DeleteCodeContext(r.Context(), rec.ID, ctxID); err != nil {
			return err
		}
	case op == "restart" && r.Method == http.MethodPost:
		if _, err := s.agent.RestartCodeContext(r.Context(), rec.ID, ctxID); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: %s /contexts/%s", sandbox.ErrNotFound, r.Method, rest)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
