package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// anthRequest is the part of a Messages API request the fake reads.
type anthRequest struct {
	Model     string        `json:"model"`
	MaxTokens *int64        `json:"max_tokens"`
	Messages  []anthMessage `json:"messages"`
	Tools     []anthTool    `json:"tools"`
	Stream    bool          `json:"stream"`
}

type anthMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	blocks  []anthBlock
}

type anthBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
}

type anthTool struct {
	Type        string         `json:"type"`
	Name        string         `json:"name"`
	InputSchema map[string]any `json:"input_schema"`
}

var anthToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// anthBlockTypes are the content block types the fake accepts in requests.
var anthBlockTypes = map[string]bool{
	"text": true, "image": true, "document": true, "search_result": true, "thinking": true,
	"redacted_thinking": true, "tool_use": true, "tool_result": true, "server_tool_use": true,
	"web_search_tool_result": true, "container_upload": true,
}

func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request, body []byte) outcome {
	fail := func(status int, typ, msg string) outcome { return writeAnthropicError(w, status, typ, msg) }
	if r.Method != http.MethodPost {
		return fail(http.StatusMethodNotAllowed, "invalid_request_error", "Method Not Allowed")
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		key = bearerToken(r)
	}
	switch {
	case key == "":
		return fail(http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	case !s.keyOK(key):
		return fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	}
	if r.Header.Get("anthropic-version") == "" {
		return fail(http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
	}
	var req anthRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fail(http.StatusBadRequest, "invalid_request_error", "There was an error parsing the body of your request: "+err.Error())
	}
	if msg := validateAnthropic(&req); msg != "" {
		return fail(http.StatusBadRequest, "invalid_request_error", msg)
	}
	if msg := s.checkAnthropicReplays(req.Messages); msg != "" {
		return fail(http.StatusBadRequest, "invalid_request_error", msg)
	}
	st := anthropicState(&req)
	turn := s.decide(st)
	if turn.Error != nil {
		e := turn.Error.withDefaults()
		out := fail(e.Status, e.Type, e.Message)
		out.state, out.stream = st, req.Stream
		return out
	}
	msg := anthropicReply(req.Model, turn)
	for _, b := range msg.Content {
		if b["type"] == "tool_use" {
			s.issue(b["id"].(string), b["name"].(string), b["input"].(json.RawMessage))
		}
	}
	w.Header().Set("request-id", newID("req_01", 22))
	if req.Stream {
		streamAnthropic(w, msg)
	} else {
		writeJSON(w, http.StatusOK, msg)
	}
	return outcome{status: http.StatusOK, stream: req.Stream, state: st}
}

func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) outcome {
	id := newID("req_01", 22)
	w.Header().Set("request-id", id)
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": id,
	})
	return outcome{status: status, err: msg}
}

// validateAnthropic checks req the way the Messages API does and returns
// the error message, or "" when the request is valid.
func validateAnthropic(req *anthRequest) string {
	switch {
	case req.Model == "":
		return "model: Field required"
	case req.MaxTokens == nil:
		return "max_tokens: Field required"
	case *req.MaxTokens < 1:
		return "max_tokens: Input should be greater than or equal to 1"
	case len(req.Messages) == 0:
		return "messages: at least one message is required"
	}
	names := map[string]bool{}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			continue // a server tool
		}
		switch {
		case !anthToolName.MatchString(t.Name):
			return fmt.Sprintf("tools.%d.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		case names[t.Name]:
			return "tools: Tool names must be unique."
		case t.InputSchema == nil:
			return fmt.Sprintf("tools.%d.custom.input_schema: Field required", i)
		case t.InputSchema["type"] != "object":
			return fmt.Sprintf("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
		names[t.Name] = true
	}
	msgs := req.Messages
	uses := map[string]bool{}
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			m.blocks = []anthBlock{{Type: "text", Text: text}}
		} else if json.Unmarshal(m.Content, &m.blocks) != nil {
			return fmt.Sprintf("messages.%d.content: Input should be a valid list", i)
		}
		if len(m.blocks) == 0 && !(m.Role == "assistant" && i == len(msgs)-1) {
			return fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		for j, b := range m.blocks {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			switch {
			case !anthBlockTypes[b.Type]:
				return fmt.Sprintf("%s: Input tag '%s' found using 'type' does not match any of the expected tags", at, b.Type)
			case b.Type == "text" && b.Text == "":
				return at + ".text: text content blocks must be non-empty"
			case b.Type == "tool_use" && m.Role != "assistant":
				return at + ": `tool_use` blocks can only be in `assistant` messages"
			case b.Type == "tool_use" && (b.ID == "" || b.Name == ""):
				return at + ".tool_use: `id` and `name` are required"
			case b.Type == "tool_use" && !isJSONObject(b.Input):
				return at + ".tool_use.input: Input should be a valid dictionary"
			case b.Type == "tool_use" && uses[b.ID]:
				return at + ": `tool_use` ids must be unique"
			case b.Type == "tool_result" && m.Role != "user":
				return at + ": `tool_result` blocks can only be in `user` messages"
			case b.Type == "tool_result" && b.ToolUseID == "":
				return at + ".tool_result.tool_use_id: Field required"
			}
			if b.Type == "tool_result" {
				if _, ok := textOf(b.Content); !ok {
					return at + ".tool_result.content: Input should be a valid list"
				}
			}
			if b.Type == "tool_use" {
				uses[b.ID] = true
			}
		}
	}
	if len(req.Tools) == 0 && (len(uses) > 0 || hasToolResult(msgs)) {
		return "Requests which include `tool_use` or `tool_result` blocks must define tools."
	}
	if msgs[0].Role != "user" {
		return `messages: first message must use the "user" role`
	}
	for i, m := range msgs {
		if msg := checkPairing(msgs, i, m); msg != "" {
			return msg
		}
	}
	return ""
}

// checkPairing checks that message i's tool_use blocks are all answered
// by tool_result blocks at the start of the next message and that its
// tool_result blocks answer the previous message's tool_use blocks.
func checkPairing(msgs []anthMessage, i int, m anthMessage) string {
	if m.Role == "user" {
		prev := map[string]bool{}
		if i > 0 && msgs[i-1].Role == "assistant" {
			for _, b := range msgs[i-1].blocks {
				if b.Type == "tool_use" {
					prev[b.ID] = true
				}
			}
		}
		answered := map[string]bool{}
		for j, b := range m.blocks {
			if b.Type != "tool_result" {
				continue
			}
			if !prev[b.ToolUseID] {
				return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. "+
					"Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
			}
			if answered[b.ToolUseID] {
				return fmt.Sprintf("messages.%d.content.%d: each tool_use must have a single result. "+
					"Found multiple `tool_result` blocks with id: %s", i, j, b.ToolUseID)
			}
			answered[b.ToolUseID] = true
		}
		return ""
	}
	var ids []string
	for _, b := range m.blocks {
		if b.Type == "tool_use" {
			ids = append(ids, b.ID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	answered := map[string]bool{}
	if i+1 < len(msgs) && msgs[i+1].Role == "user" {
		lead, total := 0, 0
		for j, b := range msgs[i+1].blocks {
			if b.Type == "tool_result" {
				total++
				answered[b.ToolUseID] = true
				if lead == j {
					lead++
				}
			}
		}
		if total > lead {
			return fmt.Sprintf("messages.%d: Did not find %d `tool_result` block(s) at the beginning of this message. "+
				"Messages following `tool_use` blocks must begin with a matching number of `tool_result` blocks.", i+1, len(ids))
		}
	}
	var missing []string
	for _, id := range ids {
		if !answered[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. "+
			"Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
	}
	return ""
}

// anthropicState derives what the script sees from a valid request.
func anthropicState(req *anthRequest) State {
	msgs := req.Messages
	st := State{API: Anthropic, Model: req.Model}
	for _, t := range req.Tools {
		st.Tools = append(st.Tools, t.Name)
	}
	for _, m := range msgs {
		if m.Role == "assistant" {
			st.Turn++
		}
	}
	for _, b := range msgs[0].blocks {
		st.Prompt += b.Text
	}
	last := msgs[len(msgs)-1]
	if last.Role != "user" || len(msgs) < 2 {
		return st
	}
	names := map[string]string{}
	for _, b := range msgs[len(msgs)-2].blocks {
		if b.Type == "tool_use" {
			names[b.ID] = b.Name
		}
	}
	for _, b := range last.blocks {
		if b.Type == "tool_result" {
			text, _ := textOf(b.Content)
			st.Results = append(st.Results, Result{
				CallID: b.ToolUseID, Name: names[b.ToolUseID], Content: text,
				IsError: b.IsError != nil && *b.IsError, Images: imagesOf(b.Content),
			})
		}
	}
	return st
}

// anthMessageOut is a Messages API response.
type anthMessageOut struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        map[string]int   `json:"usage"`
}

func anthropicReply(model string, t Turn) anthMessageOut {
	msg := anthMessageOut{ID: newID("msg_01", 22), Type: "message", Role: "assistant", Model: model,
		Content: []map[string]any{}}
	out := 1
	if t.Text != "" {
		msg.Content = append(msg.Content, map[string]any{"type": "text", "text": t.Text})
		out += tokens(t.Text)
	}
	stop := "end_turn"
	for _, c := range t.Calls {
		in := inputJSON(c)
		msg.Content = append(msg.Content, map[string]any{"type": "tool_use", "id": newID("toolu_01", 22), "name": c.Name, "input": in})
		out += tokens(string(in))
		stop = "tool_use"
	}
	msg.StopReason = &stop
	msg.Usage = map[string]int{"input_tokens": 100, "output_tokens": out}
	return msg
}

// streamAnthropic sends msg as the Messages API's server-sent events.
func streamAnthropic(w http.ResponseWriter, msg anthMessageOut) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	start := msg
	start.Content, start.StopReason = []map[string]any{}, nil
	start.Usage = map[string]int{"input_tokens": msg.Usage["input_tokens"], "output_tokens": 1}
	send("message_start", map[string]any{"type": "message_start", "message": start})
	send("ping", map[string]any{"type": "ping"})
	for i, b := range msg.Content {
		var deltas []map[string]any
		cb := map[string]any{"type": b["type"]}
		switch b["type"] {
		case "text":
			cb["text"] = ""
			for _, part := range chunks(b["text"].(string), 12) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
			}
		case "tool_use":
			cb["id"], cb["name"], cb["input"] = b["id"], b["name"], map[string]any{}
			for _, part := range chunks(string(b["input"].(json.RawMessage)), 16) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		}
		send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": cb})
		for _, d := range deltas {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": msg.StopReason, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": msg.Usage["output_tokens"]}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits s into pieces of at most n runes.
func chunks(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > n {
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	if len(r) > 0 {
		out = append(out, string(r))
	}
	return out
}

// checkAnthropicReplays checks the assistant turns' tool_use blocks for
// CheckReplays.
func (s *Server) checkAnthropicReplays(msgs []anthMessage) string {
	for i, m := range msgs {
		for j, b := range m.blocks {
			if m.Role == "assistant" && b.Type == "tool_use" && !s.replayed(b.ID, b.Name, b.Input) {
				return replayError(fmt.Sprintf("messages.%d.content.%d", i, j), b.ID)
			}
		}
	}
	return ""
}

func hasToolResult(msgs []anthMessage) bool {
	for _, m := range msgs {
		for _, b := range m.blocks {
			if b.Type == "tool_result" {
				return true
			}
		}
	}
	return false
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
