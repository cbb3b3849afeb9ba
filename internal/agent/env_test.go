package agent_test

import (
	"net/http"
	"os"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/agent"
)

// TestPutEnv: PUT /env sets variables for every later command (exec and
// processes) on top of the agent's own environment, under each request's
// env, and replaces the previous set.
func TestPutEnv(t *testing.T) {
	t.Setenv("PADDOCK_ENV_TEST_OWN", "own")
	t.Setenv("ENV_TEST_OWN", "own")
	h := newHarness(t, agent.Config{})
	show := `echo "$ENV_TEST_OWN/$ENV_TEST_A/$ENV_TEST_B/$PADDOCK_ENV_TEST_OWN"`
	if r := h.exec(api.ExecRequest{Command: show}); r.Stdout != "own///\n" {
		t.Fatalf("before: %q", r.Stdout)
	}
	h.must(http.StatusNoContent, http.MethodPut, "/env", map[string]string{"ENV_TEST_A": "a", "ENV_TEST_OWN": "set"}, nil)
	if r := h.exec(api.ExecRequest{Command: show}); r.Stdout != "set/a//\n" {
		t.Fatalf("after PUT: %q", r.Stdout)
	}
	if r := h.exec(api.ExecRequest{Command: show, Env: map[string]string{"ENV_TEST_A": "req", "ENV_TEST_B": "b"}}); r.Stdout != "set/req/b/\n" {
		t.Fatalf("request env on top: %q", r.Stdout)
	}
	var p api.Process
	h.must(http.StatusCreated, http.MethodPost, "/processes", api.ExecRequest{Command: show}, &p)
	h.must(http.StatusOK, http.MethodPost, "/processes/"+p.ID+"/wait?timeout_seconds=10", nil, &p)
	if p.Result == nil || p.Result.Stdout != "set/a//\n" {
		t.Fatalf("background process: %+v", p.Result)
	}
	h.must(http.StatusNoContent, http.MethodPut, "/env", map[string]string{}, nil)
	if r := h.exec(api.ExecRequest{Command: show}); r.Stdout != "own///\n" {
		t.Fatalf("after clearing: %q", r.Stdout)
	}
	for _, bad := range []any{map[string]string{"A=B": "x"}, map[string]string{"": "x"}, map[string]string{"A": "x\x00"}, `["a"]`, ""} {
		if st, _ := h.try(http.MethodPut, "/env", bad, nil); st != http.StatusBadRequest {
			t.Errorf("PUT /env %q: %d", bad, st)
		}
	}
	if os.Getenv("ENV_TEST_A") != "" {
		t.Fatal("PUT /env changed the agent's own environment")
	}
}
