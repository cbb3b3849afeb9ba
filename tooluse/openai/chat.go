package paddockopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// ChatTools converts Paddock tool definitions to Chat Completions function
// tools, strict when their schemas allow it (Paddock's own always do).
func ChatTools(tools []tooluse.Tool) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.InputSchema)}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if Strict(t.InputSchema) {
			fn.Strict = openai.Bool(true)
		}
		out = append(out, openai.ChatCompletionFunctionTool(fn))
	}
	return out
}

// ChatToolMessages executes the tool calls of msg one after the other and
// returns one role "tool" message per call, in the same order and with the
// matching tool_call_id. A call of a non-function (custom) tool is answered
// with an error text, so that the conversation stays valid.
func ChatToolMessages(ctx context.Context, exec Executor, msg openai.ChatCompletionMessage) []openai.ChatCompletionMessageParamUnion {
	return chatToolMessages(ctx, exec, msg, nil)
}

func chatToolMessages(ctx context.Context, exec Executor, msg openai.ChatCompletionMessage,
	hook func(string, json.RawMessage, tooluse.Result)) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(msg.ToolCalls))
	for _, tc := range msg.ToolCalls {
		text := fmt.Sprintf("error: tool %q is not a function tool", tc.Custom.Name)
		if tc.Type == "function" {
			// Chat tool messages are text only: images become a note.
			text = tooluse.ImageNote(call(ctx, exec, tc.Function.Name, tc.Function.Arguments, hook))
		}
		out = append(out, openai.ToolMessage(text, tc.ID))
	}
	return out
}

// RunChat drives the Chat Completions conversation params.Messages: it
// asks for a completion, appends the assistant message, executes its tool
// calls with session and appends one tool message per call, until a
// message has no tool calls. It returns the last completion and the whole
// conversation (params.Messages followed by the new messages).
//
// When params.Tools is empty it offers session.Tools(). RunChat closes
// session when it returns, unless opts.KeepSession is set. After an error
// it returns the conversation so far; when the model still calls tools
// after opts.MaxTurns completions, the error wraps ErrMaxTurns and the
// conversation ends with the last tool messages, ready to be continued.
func RunChat(ctx context.Context, client openai.Client, params openai.ChatCompletionNewParams, session Executor,
	opts Options) (*openai.ChatCompletion, []openai.ChatCompletionMessageParamUnion, error) {
	if !opts.KeepSession {
		defer session.Close()
	}
	if len(params.Tools) == 0 {
		params.Tools = ChatTools(session.Tools())
	}
	conv := slices.Clone(params.Messages)
	var last *openai.ChatCompletion
	for turn := 1; turn <= opts.maxTurns(); turn++ {
		params.Messages = conv
		cc, err := client.Chat.Completions.New(ctx, params, opts.RequestOptions...)
		if err != nil {
			return last, conv, fmt.Errorf("paddockopenai: turn %d: %w", turn, err)
		}
		if len(cc.Choices) == 0 {
			return cc, conv, fmt.Errorf("paddockopenai: turn %d: %w", turn, errors.New("the completion has no choices"))
		}
		last = cc
		msg := cc.Choices[0].Message
		conv = append(conv, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			return cc, conv, nil
		}
		conv = append(conv, chatToolMessages(ctx, session, msg, opts.OnToolCall)...)
	}
	return last, conv, fmt.Errorf("%w: the model still called tools after %d turns", ErrMaxTurns, opts.maxTurns())
}

// call executes one tool call and reports it to the hook.
func call(ctx context.Context, exec Executor, name, args string, hook func(string, json.RawMessage, tooluse.Result)) tooluse.Result {
	input := json.RawMessage(args)
	if args == "" {
		input = json.RawMessage("{}")
	}
	res := exec.Call(ctx, name, input)
	if hook != nil {
		hook(name, input, res)
	}
	return res
}
