package fakemodel

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAPIKey(t *testing.T) {
	srv := httptest.NewServer(New(Replies(Turn{Text: "hello"}), APIKey("sk-right")))
	defer srv.Close()
	anth := anthBody(`[` + userText + `]`)
	resp := `{"model":"gpt-x","input":"hi"}`
	for _, tc := range []struct {
		name, path, body string
		header           map[string]string
		status           int
		message          string
	}{
		{"anthropic right key", "/v1/messages", anth, map[string]string{"x-api-key": "sk-right", "anthropic-version": "1"}, 200, ""},
		{"anthropic bearer", "/v1/messages", anth, map[string]string{"Authorization": "Bearer sk-right", "anthropic-version": "1"}, 200, ""},
		{"anthropic wrong key", "/v1/messages", anth, map[string]string{"x-api-key": "nope", "anthropic-version": "1"}, 401, "invalid x-api-key"},
		{"anthropic no key", "/v1/messages", anth, map[string]string{"anthropic-version": "1"}, 401, "x-api-key header is required"},
		{"responses right key", "/v1/responses", resp, map[string]string{"Authorization": "Bearer sk-right"}, 200, ""},
		{"responses wrong key", "/v1/responses", resp, map[string]string{"Authorization": "Bearer nope"}, 401, "Incorrect API key"},
		{"chat wrong key", "/v1/chat/completions", chatBody(`[` + chatUser + `]`), map[string]string{"Authorization": "Bearer nope"}, 401, "Incorrect API key"},
		{"chat no key", "/v1/chat/completions", chatBody(`[` + chatUser + `]`), nil, 401, "didn't provide an API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv.URL, tc.path, tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, out)
			}
			if b, _ := json.Marshal(out); !strings.Contains(string(b), tc.message) {
				t.Fatalf("answer %s lacks %q", b, tc.message)
			}
		})
	}
}

func TestMaxTokensAtLeastOne(t *testing.T) {
	srv := httptest.NewServer(New(Replies(Turn{Text: "hello"})))
	defer srv.Close()
	body := strings.Replace(anthBody(`[`+userText+`]`), `"max_tokens":100`, `"max_tokens":0`, 1)
	if status, out := post(t, srv.URL, "/v1/messages", body, anthHeaders); status != 400 {
		t.Fatalf("max_tokens 0: %d %v", status, out)
	}
}

// TestCheckReplays hands a tool call back unchanged, changed and made up,
// on each API.
func TestCheckReplays(t *testing.T) {
	call := Turn{Calls: []Call{{Name: "run_python", Input: map[string]string{"code": "print(1)"}}}}
	srv := httptest.NewServer(New(func(State) Turn { return call }, CheckReplays()))
	defer srv.Close()

	// Anthropic: the tool_use block of the reply, replayed.
	status, first := post(t, srv.URL, "/v1/messages", anthBody(`[`+userText+`]`), anthHeaders)
	if status != 200 {
		t.Fatalf("first turn: %d %v", status, first)
	}
	use := first["content"].([]any)[0].(map[string]any)
	anthReplay := func(input string) string {
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": use["id"], "name": use["name"], "input": json.RawMessage(input)})
		return anthBody(`[` + userText + `,{"role":"assistant","content":[` + string(b) + `]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use["id"].(string) + `","content":"1"}]}]`)
	}
	// Chat: the tool call of the reply, replayed.
	status, chat := post(t, srv.URL, "/v1/chat/completions", chatBody(`[`+chatUser+`]`), bearerHeader)
	if status != 200 {
		t.Fatalf("chat first turn: %d %v", status, chat)
	}
	tc := chat["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	chatReplay := func(id, args string) string {
		b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "run_python", "arguments": args}}}})
		return chatBody(`[` + chatUser + `,` + string(b) + `,{"role":"tool","tool_call_id":"` + id + `","content":"1"}]`)
	}
	chatID := tc["id"].(string)
	// Responses: the function_call item of the reply, replayed in input.
	status, resp := post(t, srv.URL, "/v1/responses", `{"model":"m","input":"hi"}`, bearerHeader)
	if status != 200 {
		t.Fatalf("responses first turn: %d %v", status, resp)
	}
	fc := resp["output"].([]any)[0].(map[string]any)
	respReplay := func(args string) string {
		b, _ := json.Marshal([]any{map[string]any{"role": "user", "content": "hi"},
			map[string]any{"type": "function_call", "call_id": fc["call_id"], "name": "run_python", "arguments": args},
			map[string]any{"type": "function_call_output", "call_id": fc["call_id"], "output": "1"}})
		return `{"model":"m","input":` + string(b) + `}`
	}
	for _, c := range []struct {
		name, path, body string
		header           map[string]string
		status           int
	}{
		{"anthropic unchanged", "/v1/messages", anthReplay(`{"code": "print(1)"}`), anthHeaders, 200},
		{"anthropic changed input", "/v1/messages", anthReplay(`{"code":"print(2)"}`), anthHeaders, 400},
		{"anthropic made up", "/v1/messages", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `]}]`), anthHeaders, 400},
		{"chat unchanged", "/v1/chat/completions", chatReplay(chatID, `{"code":"print(1)"}`), bearerHeader, 200},
		{"chat changed", "/v1/chat/completions", chatReplay(chatID, `{"code":"print(3)"}`), bearerHeader, 400},
		{"chat made up", "/v1/chat/completions", chatReplay("call_nope", `{"code":"print(1)"}`), bearerHeader, 400},
		{"responses unchanged", "/v1/responses", respReplay(`{"code":"print(1)"}`), bearerHeader, 200},
		{"responses changed", "/v1/responses", respReplay(`{"code":"rm"}`), bearerHeader, 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := post(t, srv.URL, c.path, c.body, c.header)
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, out)
			}
			if b, _ := json.Marshal(out); c.status == 400 && !strings.Contains(string(b), "not one the model sent") {
				t.Fatalf("answer %s", b)
			}
		})
	}
}
