// Package paddockopenai gives an OpenAI model a Paddock sandbox through the
// official Go SDK (github.com/openai/openai-go/v3), with either API:
//
//   - Chat Completions: ChatTools converts the tool definitions,
//     ChatToolMessages answers an assistant message's tool_calls with
//     role "tool" messages, RunChat drives a conversation.
//   - Responses: ResponseTools converts the definitions to strict function
//     tools, FunctionCallOutputs answers a response's function_call items,
//     RunResponses drives a conversation with previous_response_id.
//
// For example, with the Responses API:
//
//	session := tooluse.NewSession(client.New("", ""), tooluse.Options{})
//	resp, err := paddockopenai.RunResponses(ctx, openai.NewClient(), responses.ResponseNewParams{
//		Model: openai.ChatModelGPT5_5,
//		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the 40th Fibonacci number?")},
//	}, session, paddockopenai.Options{})
//	fmt.Println(resp.OutputText())
//
// RunChat and RunResponses close the session when they return, so the
// conversation's sandbox is deleted even after an error or a panic; a
// session made with tooluse.PerCall() uses a fresh sandbox for every call.
//
// OpenAI's APIs have no error flag on tool results: a failed call is told
// by its text (the exit_code and stderr of the run_* tools' JSON, or a
// message starting with "error:").
//
// The package is named paddockopenai, not openai, so that it and the SDK
// can be imported side by side without renaming either.
package paddockopenai

import (
	"encoding/json"
	"errors"

	"github.com/openai/openai-go/v3/option"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// DefaultMaxTurns is the number of model calls RunChat and RunResponses
// make at most when Options.MaxTurns is zero.
const DefaultMaxTurns = 20

// ErrMaxTurns is returned (wrapped) by RunChat and RunResponses when the
// model still calls tools after Options.MaxTurns calls.
var ErrMaxTurns = errors.New("paddockopenai: turn limit reached")

// Executor executes tool calls; see tooluse.Executor.
type Executor = tooluse.Executor

// Options configure RunChat and RunResponses. The zero value works.
type Options struct {
	// MaxTurns bounds the number of model calls (default DefaultMaxTurns).
	MaxTurns int
	// KeepSession leaves the session open when the run returns, so that a
	// later run can continue the conversation in the same sandbox. The
	// caller then closes it.
	KeepSession bool
	// OnToolCall, when set, is called after each tool call.
	OnToolCall func(name string, input json.RawMessage, res tooluse.Result)
	// RequestOptions are passed to every API call.
	RequestOptions []option.RequestOption
}

func (o Options) maxTurns() int {
	if o.MaxTurns <= 0 {
		return DefaultMaxTurns
	}
	return o.MaxTurns
}

// Strict reports whether schema meets the rules of OpenAI's strict mode:
// every object lists all its properties as required and sets
// additionalProperties to false. Paddock's own tool schemas do.
func Strict(schema map[string]any) bool {
	props, _ := schema["properties"].(map[string]any)
	if schema["type"] != "object" && props == nil {
		return true
	}
	if schema["additionalProperties"] != false {
		return false
	}
	required := map[string]bool{}
	switch r := schema["required"].(type) {
	case []string:
		for _, k := range r {
			required[k] = true
		}
	case []any:
		for _, k := range r {
			if s, ok := k.(string); ok {
				required[s] = true
			}
		}
	}
	for k, v := range props {
		if !required[k] {
			return false
		}
		if sub, ok := v.(map[string]any); ok && !Strict(sub) {
			return false
		}
	}
	return true
}
