package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
)

// chatRequest is the part of a Chat Completions request the fake reads.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []chatTool    `json:"tools"`
	Stream   bool          `json:"stream"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters"`
		Strict     *bool          `json:"strict"`
	} `json:"function"`
}

var openAIFunctionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

var chatRoles = []string{"system", "assistant", "user", "tool", "function", "developer"}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, body []byte) outcome {
	fail := func(status int, param, code, msg string) outcome {
		return writeOpenAIError(w, status, "invalid_request_error", param, code, msg)
	}
	var req chatRequest
	if o, ok := s.decodeOpenAI(w, r, body, &req); !ok {
		return o
	}
	if param, code, msg := validateChat(&req); msg != "" {
		return fail(http.StatusBadRequest, param, code, msg)
	}
	for i, m := range req.Messages {
		for j, c := range m.ToolCalls {
			if m.Role == "assistant" && !s.replayed(c.ID, c.Function.Name, json.RawMessage(c.Function.Arguments)) {
				return fail(http.StatusBadRequest, fmt.Sprintf("messages[%d].tool_calls[%d]", i, j), "", replayError(fmt.Sprintf("messages[%d].tool_calls[%d]", i, j), c.ID))
			}
		}
	}
	st := chatState(&req)
	turn := s.decide(st)
	if turn.Error != nil {
		e := turn.Error.withDefaults()
		out := writeOpenAIError(w, e.Status, e.Type, "", "", e.Message)
		out.state = st
		return out
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if turn.Text != "" {
		msg["content"] = turn.Text
	}
	finish, out := "stop", tokens(turn.Text)
	var calls []map[string]any
	for _, c := range turn.Calls {
		id, args := newID("call_", 24), string(inputJSON(c))
		calls = append(calls, map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": args}})
		s.issue(id, c.Name, json.RawMessage(args))
		out += tokens(args)
		finish = "tool_calls"
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	w.Header().Set("x-request-id", newID("req_", 32))
	writeJSON(w, http.StatusOK, map[string]any{
		"id": newID("chatcmpl-", 29), "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices":      []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":        map[string]int{"prompt_tokens": 100, "completion_tokens": out, "total_tokens": 100 + out},
		"service_tier": "default", "system_fingerprint": "fp_fakemodel",
	})
	return outcome{status: http.StatusOK, state: st}
}

// writeOpenAIError writes an OpenAI error body; empty param and code are
// sent as null.
func writeOpenAIError(w http.ResponseWriter, status int, typ, param, code, msg string) outcome {
	orNull := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": orNull(param), "code": orNull(code),
	}})
	return outcome{status: status, err: msg}
}

// validateChat checks req the way Chat Completions does and returns the
// error's param, code and message, or an empty message.
func validateChat(req *chatRequest) (param, code, msg string) {
	switch {
	case req.Model == "":
		return "", "", "you must provide a model parameter"
	case req.Stream:
		return "stream", "unsupported_value", "fakemodel: streaming Chat Completions are not supported"
	case len(req.Messages) == 0:
		return "messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
	}
	for i, t := range req.Tools {
		at := fmt.Sprintf("tools[%d].function", i)
		switch {
		case t.Type != "function" && t.Type != "custom":
			return fmt.Sprintf("tools[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
		case t.Type == "function" && !openAIFunctionName.MatchString(t.Function.Name):
			return at + ".name", "invalid_value", fmt.Sprintf("Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", at)
		}
		if t.Function.Strict != nil && *t.Function.Strict {
			if msg := strictSchemaError(t.Function.Name, t.Function.Parameters); msg != "" {
				return at + ".parameters", "invalid_function_parameters", msg
			}
		}
	}
	for i, m := range req.Messages {
		if !slices.Contains(chatRoles, m.Role) {
			return fmt.Sprintf("messages[%d].role", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role)
		}
		if _, ok := textOf(m.Content); !ok {
			return fmt.Sprintf("messages[%d].content", i), "invalid_type", fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of objects.", i)
		}
		if m.Role == "tool" && m.ToolCallID == nil {
			return fmt.Sprintf("messages.[%d].tool_call_id", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'messages[%d].tool_call_id'.", i)
		}
	}
	// Every assistant message with tool_calls must be followed by tool
	// messages answering each call; every tool message must answer a call
	// of the assistant message before its run of tool messages.
	var pending []string // calls not answered yet, in order
	var calls map[string]bool
	for i, m := range req.Messages {
		if m.Role == "tool" {
			id := *m.ToolCallID
			switch {
			case calls == nil:
				return fmt.Sprintf("messages.[%d].role", i), "", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
			case !calls[id]:
				return fmt.Sprintf("messages.[%d].tool_call_id", i), "", fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", id)
			case !slices.Contains(pending, id):
				return fmt.Sprintf("messages.[%d].tool_call_id", i), "", fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' was answered more than once.", id)
			}
			pending = slices.DeleteFunc(pending, func(p string) bool { return p == id })
			continue
		}
		if len(pending) > 0 {
			return fmt.Sprintf("messages.[%d].role", i), "", unansweredCalls(pending)
		}
		calls = nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			calls = map[string]bool{}
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
				pending = append(pending, c.ID)
			}
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("messages.[%d].role", len(req.Messages)-1), "", unansweredCalls(pending)
	}
	return "", "", ""
}

func unansweredCalls(ids []string) string {
	return "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
		"The following tool_call_ids did not have response messages: " + strings.Join(ids, ", ")
}

// chatState derives what the script sees from a valid request.
func chatState(req *chatRequest) State {
	st := State{API: Chat, Model: req.Model}
	for _, t := range req.Tools {
		if t.Type == "function" {
			st.Tools = append(st.Tools, t.Function.Name)
		}
	}
	names := map[string]string{}
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			st.Turn++
			st.Results = nil
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
			}
		case "user":
			if st.Prompt == "" {
				st.Prompt, _ = textOf(m.Content)
			}
			st.Results = nil
		case "tool":
			text, _ := textOf(m.Content)
			st.Results = append(st.Results, Result{CallID: *m.ToolCallID, Name: names[*m.ToolCallID], Content: text})
		}
	}
	return st
}

// strictSchemaError checks a function schema against the rules of strict
// mode (Structured Outputs): every object has additionalProperties false
// and lists every property as required.
func strictSchemaError(name string, schema map[string]any) string {
	var check func(ctx []string, s map[string]any) string
	check = func(ctx []string, s map[string]any) string {
		where := fmt.Sprintf("Invalid schema for function '%s': In context=(%s), ", name, strings.Join(ctx, ", "))
		props, _ := s["properties"].(map[string]any)
		if s["type"] != "object" && props == nil {
			return ""
		}
		if s["additionalProperties"] != false {
			return where + "'additionalProperties' is required to be supplied and to be false."
		}
		required := map[string]bool{}
		switch req := s["required"].(type) {
		case []any:
			for _, r := range req {
				if str, ok := r.(string); ok {
					required[str] = true
				}
			}
		case []string:
			for _, r := range req {
				required[r] = true
			}
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !required[k] {
				return where + fmt.Sprintf("'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", k)
			}
			if sub, ok := props[k].(map[string]any); ok {
				if msg := check(append(slices.Clone(ctx), "'properties'", "'"+k+"'"), sub); msg != "" {
					return msg
				}
			}
		}
		return ""
	}
	if schema == nil {
		schema = map[string]any{}
	}
	return check(nil, schema)
}

// decodeOpenAI does what both OpenAI endpoints check first: the method, the
// API key and a JSON body, decoded into v. When ok is false it has already
// answered with the real API's error.
func (s *Server) decodeOpenAI(w http.ResponseWriter, r *http.Request, body []byte, v any) (o outcome, ok bool) {
	fail := func(status int, msg string) outcome {
		return writeOpenAIError(w, status, "invalid_request_error", "", "", msg)
	}
	if r.Method != http.MethodPost {
		return fail(http.StatusMethodNotAllowed, "Method Not Allowed"), false
	}
	switch key := bearerToken(r); {
	case key == "":
		return fail(http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."), false
	case !s.keyOK(key):
		return writeOpenAIError(w, http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key", "Incorrect API key provided."), false
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fail(http.StatusBadRequest, "We could not parse the JSON body of your request. ("+err.Error()+")"), false
	}
	return outcome{}, true
}
