package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// respRequest is the part of a Responses API request the fake reads.
type respRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Tools              json.RawMessage `json:"tools"`
	Store              *bool           `json:"store"`
	Stream             bool            `json:"stream"`

	items []respItem
	tools []respTool
}

type respItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type respTool struct {
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	Parameters map[string]any `json:"parameters"`
	Strict     *bool          `json:"strict"`
}

// storedResponse is the state the fake keeps of a stored response, for
// requests continuing it with previous_response_id.
type storedResponse struct {
	turn   int
	prompt string
	// calls maps the call_id of each function_call the response (and its
	// input) left for the next request to answer to the function name.
	calls map[string]string
	order []string
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, body []byte) outcome {
	fail := func(status int, param, code, msg string) outcome {
		return writeOpenAIError(w, status, "invalid_request_error", param, code, msg)
	}
	var req respRequest
	if o, ok := s.decodeOpenAI(w, r, body, &req); !ok {
		return o
	}
	if param, code, msg := validateResponsesShape(&req); msg != "" {
		return fail(http.StatusBadRequest, param, code, msg)
	}
	for i, it := range req.items {
		if it.Type == "function_call" && !s.replayed(it.CallID, it.Name, json.RawMessage(it.Arguments)) {
			at := fmt.Sprintf("input[%d]", i)
			return fail(http.StatusBadRequest, at, "", replayError(at, it.CallID))
		}
	}
	// The pairing check and the state update happen under one lock, so a
	// response is continued at most as the store says.
	s.mu.Lock()
	st, prev, status, param, code, msg := s.responsesState(&req)
	s.mu.Unlock()
	if msg != "" {
		return fail(status, param, code, msg)
	}
	turn := s.decide(st)
	if turn.Error != nil {
		e := turn.Error.withDefaults()
		out := writeOpenAIError(w, e.Status, e.Type, "", "", e.Message)
		out.state = st
		return out
	}
	id := "resp_" + newID("", 48)
	output := []any{}
	stored := &storedResponse{turn: st.Turn, prompt: st.Prompt, calls: map[string]string{}}
	out := 0
	if turn.Text != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_" + newID("", 48), "status": "completed",
			"role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": turn.Text, "annotations": []any{}}}})
		out += tokens(turn.Text)
	}
	for _, c := range turn.Calls {
		callID, args := newID("call_", 24), string(inputJSON(c))
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + newID("", 48), "call_id": callID,
			"name": c.Name, "arguments": args, "status": "completed"})
		stored.calls[callID] = c.Name
		s.issue(callID, c.Name, json.RawMessage(args))
		stored.order = append(stored.order, callID)
		out += tokens(args)
	}
	if req.Store == nil || *req.Store {
		s.mu.Lock()
		s.responses[id] = stored
		s.mu.Unlock()
	}
	tools := req.Tools
	if len(tools) == 0 {
		tools = json.RawMessage("[]")
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "object": "response", "created_at": time.Now().Unix(), "status": "completed", "background": false,
		"error": nil, "incomplete_details": nil, "instructions": req.Instructions, "max_output_tokens": nil,
		"model": req.Model, "output": output, "parallel_tool_calls": true, "previous_response_id": prev,
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": req.Store == nil || *req.Store,
		"temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto",
		"tools": tools, "top_p": 1.0, "truncation": "disabled", "user": nil, "metadata": map[string]any{},
		"usage": map[string]any{"input_tokens": 100, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": out, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 100 + out},
	})
	return outcome{status: http.StatusOK, state: st}
}

// validateResponsesShape checks the parts of req that need no stored
// state.
func validateResponsesShape(req *respRequest) (param, code, msg string) {
	switch {
	case req.Model == "":
		return "model", "missing_required_parameter", "Missing required parameter: 'model'."
	case req.Stream:
		return "stream", "unsupported_value", "fakemodel: streaming Responses are not supported"
	case len(req.Input) == 0 && req.PreviousResponseID == nil:
		return "input", "missing_required_parameter", "Missing required parameter: 'input'."
	}
	if len(req.Tools) > 0 {
		if err := json.Unmarshal(req.Tools, &req.tools); err != nil {
			return "tools", "invalid_type", "Invalid type for 'tools': expected an array of objects."
		}
	}
	for i, t := range req.tools {
		if t.Type != "function" {
			continue
		}
		if !openAIFunctionName.MatchString(t.Name) {
			return fmt.Sprintf("tools[%d].name", i), "invalid_value", fmt.Sprintf("Invalid 'tools[%d].name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		if t.Strict == nil || *t.Strict {
			if msg := strictSchemaError(t.Name, t.Parameters); msg != "" {
				return fmt.Sprintf("tools[%d].parameters", i), "invalid_function_parameters", msg
			}
		}
	}
	var text string
	switch {
	case len(req.Input) == 0:
	case json.Unmarshal(req.Input, &text) == nil:
		req.items = []respItem{{Type: "message", Role: "user", Content: req.Input}}
	case json.Unmarshal(req.Input, &req.items) != nil:
		return "input", "invalid_type", "Invalid type for 'input': expected one of a string or array of input items."
	}
	for i := range req.items {
		it := &req.items[i]
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			if _, ok := textOf(it.Content); !ok {
				return fmt.Sprintf("input[%d].content", i), "invalid_type", fmt.Sprintf("Invalid type for 'input[%d].content': expected one of a string or array of input content.", i)
			}
		case "function_call", "function_call_output":
			if it.CallID == "" {
				return fmt.Sprintf("input[%d].call_id", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'input[%d].call_id'.", i)
			}
			if _, ok := textOf(it.Output); it.Type == "function_call_output" && (len(it.Output) == 0 || !ok) {
				return fmt.Sprintf("input[%d].output", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'input[%d].output'.", i)
			}
		case "reasoning", "item_reference":
		default:
			return fmt.Sprintf("input[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'message', 'function_call', 'function_call_output', 'reasoning' and 'item_reference'.", it.Type)
		}
	}
	return "", "", ""
}

// responsesState checks that every function call pending from the
// previous response or the input is answered exactly once, and derives
// what the script sees. s.mu is held.
func (s *Server) responsesState(req *respRequest) (st State, prev any, status int, param, code, msg string) {
	st = State{API: Responses, Model: req.Model}
	for _, t := range req.tools {
		if t.Type == "function" {
			st.Tools = append(st.Tools, t.Name)
		}
	}
	pending := map[string]string{} // call_id -> name
	var order []string
	if req.PreviousResponseID != nil {
		id := *req.PreviousResponseID
		p, ok := s.responses[id]
		if !ok {
			return st, nil, http.StatusBadRequest, "previous_response_id", "previous_response_not_found",
				fmt.Sprintf("Previous response with id '%s' not found.", id)
		}
		prev = id
		st.Turn, st.Prompt = p.turn+1, p.prompt
		for _, c := range p.order {
			pending[c], order = p.calls[c], append(order, c)
		}
	}
	answered := map[string]bool{}
	for _, it := range req.items {
		switch it.Type {
		case "message":
			if st.Prompt == "" && it.Role == "user" {
				st.Prompt, _ = textOf(it.Content)
			}
		case "function_call":
			// A replayed history: the script sees the results of the last turn only.
			if len(st.Results) > 0 {
				st.Results = nil
			}
			pending[it.CallID], order = it.Name, append(order, it.CallID)
		case "function_call_output":
			name, ok := pending[it.CallID]
			if !ok || answered[it.CallID] {
				return st, prev, http.StatusBadRequest, "input", "",
					fmt.Sprintf("No tool call found for function call output with call_id %s.", it.CallID)
			}
			answered[it.CallID] = true
			text, _ := textOf(it.Output)
			st.Results = append(st.Results, Result{CallID: it.CallID, Name: name, Content: text, Images: imagesOf(it.Output)})
		}
	}
	for _, c := range order {
		if !answered[c] {
			return st, prev, http.StatusBadRequest, "input", "", fmt.Sprintf("No tool output found for function call %s.", c)
		}
	}
	st.Turn += countAssistantItems(req.items)
	return st, prev, 0, "", "", ""
}

// countAssistantItems counts the model turns replayed in the input (runs
// of assistant messages and function calls), for conversations that
// replay their history instead of using previous_response_id.
func countAssistantItems(items []respItem) int {
	n, in := 0, false
	for _, it := range items {
		model := it.Type == "function_call" || it.Type == "reasoning" || (it.Type == "message" && it.Role == "assistant")
		if model && !in {
			n++
		}
		in = model
	}
	return n
}
