package fakemodel

import (
	"net/http/httptest"
	"strings"
	"testing"
)

var bearerHeader = map[string]string{"Authorization": "Bearer k"}

const (
	strictTool = `{"type":"function","function":{"name":"run_python","strict":true,"parameters":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false}}}`
	chatUser   = `{"role":"user","content":"hi"}`
	chatCallAB = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"run_python","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"run_python","arguments":"{}"}}]}`
	toolA      = `{"role":"tool","tool_call_id":"call_a","content":"out a"}`
	toolB      = `{"role":"tool","tool_call_id":"call_b","content":[{"type":"text","text":"out b"}]}`
)

func chatBody(messages string) string {
	return `{"model":"gpt-x","tools":[` + strictTool + `],"messages":` + messages + `}`
}

// checkOpenAIError checks the status and the shape of an OpenAI error.
func checkOpenAIError(t *testing.T, status int, out map[string]any, wantStatus int, param, message string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d: %v", status, out)
	}
	if wantStatus == 200 {
		return
	}
	e, _ := out["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if e["type"] != "invalid_request_error" || !strings.Contains(msg, message) || (param != "" && e["param"] != param) {
		t.Fatalf("error %v", out)
	}
	if _, ok := e["code"]; !ok {
		t.Fatalf("no code field: %v", out)
	}
}

func TestChatValidation(t *testing.T) {
	srv := httptest.NewServer(New(func(State) Turn { return Turn{Text: "hello"} }))
	defer srv.Close()
	cases := []struct {
		name    string
		body    string
		header  map[string]string
		status  int
		param   string
		message string
	}{
		{"plain", chatBody(`[` + chatUser + `]`), bearerHeader, 200, "", ""},
		{"answered", chatBody(`[` + chatUser + `,` + chatCallAB + `,` + toolB + `,` + toolA + `]`), bearerHeader, 200, "", ""},
		{"no key", chatBody(`[` + chatUser + `]`), nil, 401, "", "You didn't provide an API key"},
		{"no model", `{"messages":[` + chatUser + `]}`, bearerHeader, 400, "", "you must provide a model parameter"},
		{"unanswered", chatBody(`[` + chatUser + `,` + chatCallAB + `,` + toolA + `,` + chatUser + `]`), bearerHeader, 400, "messages.[3].role",
			"The following tool_call_ids did not have response messages: call_b"},
		{"trailing calls", chatBody(`[` + chatUser + `,` + chatCallAB + `]`), bearerHeader, 400, "", "did not have response messages: call_a, call_b"},
		{"tool without call", chatBody(`[` + chatUser + `,` + toolA + `]`), bearerHeader, 400, "messages.[1].role",
			"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"unknown id", chatBody(`[` + chatUser + `,` + chatCallAB + `,` + toolA + `,` + toolB + `,` + strings.Replace(toolA, "call_a", "call_x", 1) + `]`), bearerHeader, 400, "",
			"'tool_call_id' of 'call_x' not found in 'tool_calls' of previous message"},
		{"duplicate answer", chatBody(`[` + chatUser + `,` + chatCallAB + `,` + toolA + `,` + toolA + `,` + toolB + `]`), bearerHeader, 400, "", "answered more than once"},
		{"missing tool_call_id", chatBody(`[` + chatUser + `,{"role":"tool","content":"x"}]`), bearerHeader, 400, "", "Missing required parameter: 'messages[1].tool_call_id'"},
		{"bad role", chatBody(`[{"role":"robot","content":"x"}]`), bearerHeader, 400, "", "Invalid value: 'robot'"},
		{"strict needs required", `{"model":"m","tools":[` + strings.Replace(strictTool, `"required":["code"]`, `"required":[]`, 1) + `],"messages":[` + chatUser + `]}`,
			bearerHeader, 400, "tools[0].function.parameters", "Missing 'code'"},
		{"strict needs additionalProperties", `{"model":"m","tools":[` + strings.Replace(strictTool, `,"additionalProperties":false`, ``, 1) + `],"messages":[` + chatUser + `]}`,
			bearerHeader, 400, "", "'additionalProperties' is required to be supplied and to be false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv.URL, "/v1/chat/completions", tc.body, tc.header)
			checkOpenAIError(t, status, out, tc.status, tc.param, tc.message)
			if status == 200 {
				choice := out["choices"].([]any)[0].(map[string]any)
				if out["object"] != "chat.completion" || choice["finish_reason"] != "stop" || choice["message"].(map[string]any)["content"] != "hello" {
					t.Fatalf("reply %v", out)
				}
			}
		})
	}
}

func TestResponsesValidation(t *testing.T) {
	fake := New(func(st State) Turn {
		if st.Turn == 0 {
			return Turn{Calls: []Call{{Name: "run_python", Input: map[string]string{"code": "1"}}, {Name: "run_python"}}}
		}
		return Turn{Text: "turn " + string(rune('0'+st.Turn))}
	})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	tools := `"tools":[{"type":"function","name":"run_python","strict":true,"parameters":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false}}]`
	status, first := post(t, srv.URL, "/v1/responses", `{"model":"m","input":"hi",`+tools+`}`, bearerHeader)
	if status != 200 || first["object"] != "response" || len(first["output"].([]any)) != 2 {
		t.Fatalf("first: %d %v", status, first)
	}
	id := first["id"].(string)
	var calls []string
	for _, it := range first["output"].([]any) {
		item := it.(map[string]any)
		if item["type"] != "function_call" || item["name"] != "run_python" {
			t.Fatalf("item %v", item)
		}
		calls = append(calls, item["call_id"].(string))
	}
	output := func(callID string) string {
		return `{"type":"function_call_output","call_id":"` + callID + `","output":"done"}`
	}
	cont := func(prev string, items ...string) string {
		return `{"model":"m","previous_response_id":"` + prev + `",` + tools + `,"input":[` + strings.Join(items, ",") + `]}`
	}
	cases := []struct {
		name    string
		body    string
		status  int
		param   string
		message string
	}{
		{"unanswered", cont(id, output(calls[0])), 400, "input", "No tool output found for function call " + calls[1] + "."},
		{"user message instead", cont(id, `{"role":"user","content":"hi"}`), 400, "input", "No tool output found for function call " + calls[0]},
		{"unknown call_id", cont(id, output(calls[0]), output(calls[1]), output("call_x")), 400, "input",
			"No tool call found for function call output with call_id call_x."},
		{"duplicate output", cont(id, output(calls[0]), output(calls[0]), output(calls[1])), 400, "input", "No tool call found"},
		{"unknown previous", cont("resp_x", output(calls[0])), 400, "previous_response_id", "Previous response with id 'resp_x' not found."},
		{"strict by default", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}]}`,
			400, "tools[0].parameters", "'additionalProperties' is required"},
		{"no model", `{"input":"hi"}`, 400, "model", "Missing required parameter: 'model'."},
		{"answered", cont(id, output(calls[1]), output(calls[0])), 200, "", ""},
		{"replayed calls", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"run_python","arguments":"{}"},` + output("c1") + `]}`, 200, "", ""},
		{"replayed two turns", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"run_python","arguments":"{}"},` + output("c1") +
			`,{"type":"function_call","call_id":"c2","name":"run_python","arguments":"{}"},` + output("c2") + `]}`, 200, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, out := post(t, srv.URL, "/v1/responses", tc.body, bearerHeader)
			checkOpenAIError(t, status, out, tc.status, tc.param, tc.message)
			if status == 200 && out["output"].([]any)[0].(map[string]any)["type"] != "message" {
				t.Fatalf("reply %v", out)
			}
		})
	}
	reqs := fake.Requests()
	// A replayed history (as the OpenAI Agents SDK sends): the script sees the last turn's results only.
	if last := reqs[len(reqs)-1].State; last.Turn != 2 || len(last.Results) != 1 || last.Results[0].CallID != "c2" {
		t.Fatalf("replayed two turns: state %+v", last)
	}
	reqs = reqs[:len(reqs)-1]
	answered := reqs[len(reqs)-2].State
	if answered.Turn != 1 || answered.Prompt != "hi" || len(answered.Results) != 2 || answered.Results[0].CallID != calls[1] || answered.Results[0].Content != "done" {
		t.Fatalf("state %+v", answered)
	}
	if replayed := reqs[len(reqs)-1].State; replayed.Turn != 1 || len(replayed.Results) != 1 {
		t.Fatalf("replayed state %+v", replayed)
	}
	// A response stored with store:false cannot be continued.
	_, unstored := post(t, srv.URL, "/v1/responses", `{"model":"m","input":"hi","store":false}`, bearerHeader)
	status, out := post(t, srv.URL, "/v1/responses", cont(unstored["id"].(string)), bearerHeader)
	checkOpenAIError(t, status, out, 400, "previous_response_id", "not found")
}
