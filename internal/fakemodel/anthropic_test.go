package fakemodel

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body to the fake and returns the status and decoded answer.
func post(t *testing.T, url, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

var anthHeaders = map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"}

// anthBody wraps messages (a JSON array) into a Messages API request.
func anthBody(messages string) string {
	return `{"model":"claude-x","max_tokens":100,"tools":[{"name":"run_python","input_schema":{"type":"object"}}],"messages":` + messages + `}`
}

const (
	userText = `{"role":"user","content":"hi"}`
	useA     = `{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_a","name":"run_python","input":{"code":"1"}}]}`
	useAB    = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"run_python","input":{}},{"type":"tool_use","id":"toolu_b","name":"run_python","input":{}}]}`
	resultA  = `{"type":"tool_result","tool_use_id":"toolu_a","content":"out","is_error":true}`
	resultB  = `{"type":"tool_result","tool_use_id":"toolu_b","content":[{"type":"text","text":"out b"}]}`
)

func TestAnthropicValidation(t *testing.T) {
	srv := httptest.NewServer(New(Replies(Turn{Text: "hello"})))
	defer srv.Close()
	cases := []struct {
		name    string
		body    string
		header  map[string]string
		status  int
		errType string
		message string // substring of the error message
	}{
		{"plain", anthBody(`[` + userText + `]`), anthHeaders, 200, "", ""},
		{"answered", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `,{"type":"text","text":"go on"}]}]`), anthHeaders, 200, "", ""},
		{"answered out of order", anthBody(`[` + userText + `,` + useAB + `,{"role":"user","content":[` + resultB + `,` + resultA + `]}]`), anthHeaders, 200, "", ""},
		{"no key", anthBody(`[` + userText + `]`), map[string]string{"anthropic-version": "2023-06-01"}, 401, "authentication_error", "x-api-key"},
		{"no version", anthBody(`[` + userText + `]`), map[string]string{"x-api-key": "k"}, 400, "invalid_request_error", "anthropic-version"},
		{"no max_tokens", `{"model":"m","messages":[` + userText + `]}`, anthHeaders, 400, "invalid_request_error", "max_tokens: Field required"},
		{"bad schema", `{"model":"m","max_tokens":1,"tools":[{"name":"x","input_schema":{"type":"string"}}],"messages":[` + userText + `]}`, anthHeaders, 400, "invalid_request_error", "input_schema.type"},
		{"unanswered", anthBody(`[` + userText + `,` + useA + `,` + userText + `]`), anthHeaders, 400, "invalid_request_error",
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a"},
		{"trailing tool_use", anthBody(`[` + userText + `,` + useA + `]`), anthHeaders, 400, "invalid_request_error", "without `tool_result` blocks"},
		{"partly answered", anthBody(`[` + userText + `,` + useAB + `,{"role":"user","content":[` + resultA + `]}]`), anthHeaders, 400, "invalid_request_error",
			"immediately after: toolu_b."},
		{"results not first", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[{"type":"text","text":"x"},` + resultA + `]}]`), anthHeaders, 400, "invalid_request_error",
			"messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message"},
		{"unknown id", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `,` + resultB + `]}]`), anthHeaders, 400, "invalid_request_error",
			"messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_b"},
		{"result without use", anthBody(`[{"role":"user","content":[` + resultA + `]}]`), anthHeaders, 400, "invalid_request_error", "unexpected `tool_use_id`"},
		{"duplicate result", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `,` + resultA + `]}]`), anthHeaders, 400, "invalid_request_error",
			"Found multiple `tool_result` blocks with id: toolu_a"},
		{"duplicate use", anthBody(`[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `]},` + useA + `,{"role":"user","content":[` + resultA + `]}]`), anthHeaders, 400, "invalid_request_error",
			"`tool_use` ids must be unique"},
		{"no tools", `{"model":"m","max_tokens":1,"messages":[` + userText + `,` + useA + `,{"role":"user","content":[` + resultA + `]}]}`, anthHeaders, 400, "invalid_request_error",
			"must define tools"},
		{"empty text", anthBody(`[{"role":"user","content":[{"type":"text","text":""}]}]`), anthHeaders, 400, "invalid_request_error", "text content blocks must be non-empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv.URL, "/v1/messages", tc.body, tc.header)
			if status != tc.status {
				t.Fatalf("status %d: %v", status, out)
			}
			if tc.status == 200 {
				if out["type"] != "message" || out["role"] != "assistant" || out["stop_reason"] != "end_turn" {
					t.Fatalf("reply %v", out)
				}
				return
			}
			e, _ := out["error"].(map[string]any)
			if out["type"] != "error" || e["type"] != tc.errType || !strings.Contains(e["message"].(string), tc.message) {
				t.Fatalf("error %v", out)
			}
		})
	}
}

func TestAnthropicStateAndStream(t *testing.T) {
	fake := New(Replies(Turn{}, Turn{Text: "done: 42", Calls: []Call{{Name: "run_python", Input: map[string]string{"code": "print('é')"}}}}))
	srv := httptest.NewServer(fake)
	defer srv.Close()
	body := strings.Replace(anthBody(`[`+userText+`,`+useAB+`,{"role":"user","content":[`+resultA+`,`+resultB+`]}]`), `"model"`, `"stream":true,"model"`, 1)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
	for k, v := range anthHeaders {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	var events []string
	var partial string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok && (len(events) == 0 || events[len(events)-1] != ev) {
			events = append(events, ev)
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, "input_json_delta") {
			var d struct {
				Delta struct {
					PartialJSON string `json:"partial_json"`
				}
			}
			json.Unmarshal([]byte(data), &d)
			partial += d.Delta.PartialJSON
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(events, " "); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if partial != `{"code":"print('é')"}` {
		t.Fatalf("streamed input %q", partial)
	}
	st := fake.Requests()[0].State
	if st.Turn != 1 || st.Prompt != "hi" || len(st.Results) != 2 || st.Results[0].CallID != "toolu_a" || !st.Results[0].IsError ||
		st.Results[1].Content != "out b" || st.Results[1].IsError || st.Results[1].Name != "run_python" {
		t.Fatalf("state %+v", st)
	}
	io.Copy(io.Discard, resp.Body)
}

func TestScriptedError(t *testing.T) {
	srv := httptest.NewServer(New(Replies(Turn{Error: &Error{Status: 529, Type: "overloaded_error", Message: "Overloaded"}})))
	defer srv.Close()
	status, out := post(t, srv.URL, "/v1/messages", anthBody(`[`+userText+`]`), anthHeaders)
	if e, _ := out["error"].(map[string]any); status != 529 || e["type"] != "overloaded_error" {
		t.Fatalf("%d %v", status, out)
	}
	status, out = post(t, srv.URL, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer k"})
	if e, _ := out["error"].(map[string]any); status != 529 || e["message"] != "Overloaded" {
		t.Fatalf("%d %v", status, out)
	}
}
