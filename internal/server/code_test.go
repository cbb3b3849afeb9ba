package server_test

import (
	"net/http"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

// TestCodeRoutes drives every code route through HTTP against the fake
// backend's in-process agent (Bash, which every test host has).
func TestCodeRoutes(t *testing.T) {
	ts := newTestServer(t)
	sb := ts.create(ts.alice)
	base := "/v1/sandboxes/" + sb.ID + "/code"

	var cc api.CodeContext
	ts.json(http.MethodPost, base+"/contexts", ts.alice, api.CodeContextRequest{Language: "bash"}, http.StatusCreated, &cc)
	var res api.CodeExecution
	ts.json(http.MethodPost, base, ts.alice, api.CodeRequest{ContextID: cc.ID, Code: "V=7"}, http.StatusOK, &res)
	ts.json(http.MethodPost, base, ts.alice, api.CodeRequest{ContextID: cc.ID, Code: "echo $V"}, http.StatusOK, &res)
	if res.Stdout != "7\n" || res.ExecutionCount != 2 || res.Error != nil {
		t.Fatalf("cell: %+v", res)
	}
	var list api.CodeContextList
	ts.json(http.MethodGet, base+"/contexts", ts.alice, nil, http.StatusOK, &list)
	if len(list.Contexts) != 1 || list.Contexts[0].ID != cc.ID {
		t.Fatalf("list: %+v", list)
	}
	ts.json(http.MethodPost, base+"/contexts/"+cc.ID+"/interrupt", ts.alice, nil, http.StatusOK, &cc)
	ts.json(http.MethodPost, base+"/contexts/"+cc.ID+"/restart", ts.alice, nil, http.StatusOK, &cc)
	ts.json(http.MethodGet, base+"/contexts/"+cc.ID, ts.alice, nil, http.StatusOK, &cc)
	if cc.ExecutionCount != 0 {
		t.Fatalf("after restart: %+v", cc)
	}

	for _, tc := range []struct {
		name, method, path, key string
		body                    any
		status                  int
		code                    string
	}{
		{"another key's sandbox", http.MethodPost, base, ts.bob, api.CodeRequest{Code: "1"}, 404, api.CodeNotFound},
		{"unknown language", http.MethodPost, base, ts.alice, api.CodeRequest{Code: "1", Language: "cobol"}, 400, api.CodeBadRequest},
		{"unknown context", http.MethodGet, base + "/contexts/nope", ts.alice, nil, 404, api.CodeNotFound},
		{"language mismatch", http.MethodPost, base, ts.alice, api.CodeRequest{ContextID: cc.ID, Language: "python", Code: "1"}, 400, api.CodeBadRequest},
		{"unknown field", http.MethodPost, base, ts.alice, `{"code":"1","nope":1}`, 400, api.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.do(tc.method, tc.path, tc.key, tc.body)
			if r.status != tc.status || r.errBody(t).Code != tc.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	if r := ts.do(http.MethodDelete, base+"/contexts/"+cc.ID, ts.alice, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
}
