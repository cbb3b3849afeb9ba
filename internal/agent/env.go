package agent

import (
	"net/http"
	"os"
	"strings"
	"sync"
)

// maxEnvBytes bounds the environment set with PUT /env.
const maxEnvBytes = 256 << 10

// envStore is the environment the daemon sets for every later command
// with PUT /env: the daemon hands a pre-created (warm pool) sandbox to a
// request with env this way, since the agent's own environment, which
// commands inherit, was fixed when the sandbox started.
type envStore struct {
	mu   sync.RWMutex
	vars map[string]string
}

// handlePutEnv replaces the stored environment with the JSON object in
// the body ({} clears it). Every command started afterwards (exec and
// processes) gets the agent's own environment, then these variables, then
// its request's env on top.
func (s *Server) handlePutEnv(w http.ResponseWriter, r *http.Request) error {
	var vars map[string]string
	if err := decodeJSON(w, r, &vars, maxEnvBytes, false); err != nil {
		return err
	}
	for k, v := range vars {
		if k == "" || strings.ContainsAny(k, "=\x00") || hasNUL(v) {
			return badRequest("invalid environment variable %q", k)
		}
	}
	s.env.mu.Lock()
	s.env.vars = vars
	s.env.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// baseEnv is the environment commands start from: the agent's own with
// the stored variables set on top.
func (s *Server) baseEnv() []string {
	s.env.mu.RLock()
	vars := s.env.vars
	s.env.mu.RUnlock()
	if len(vars) == 0 {
		return os.Environ()
	}
	env, err := commandEnv(os.Environ(), vars)
	if err != nil { // checked on PUT; cannot happen
		return os.Environ()
	}
	return env
}
