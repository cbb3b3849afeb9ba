// Package paddockanthropic gives a Claude model a Paddock sandbox through
// Anthropic's Messages API and its official Go SDK
// (github.com/anthropics/anthropic-sdk-go). Tools converts Paddock's tool
// definitions, ToolResults answers the tool_use blocks of an assistant
// message, and Run and RunStreaming drive a whole conversation, executing
// every tool call in the session's sandbox:
//
//	session := tooluse.NewSession(client.New("", ""), tooluse.Options{})
//	msg, conversation, err := paddockanthropic.Run(ctx, anthropic.NewClient(), anthropic.MessageNewParams{
//		Model:     anthropic.ModelClaudeSonnet5_5,
//		MaxTokens: 4096,
//		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the 1000th prime?"))},
//	}, session, paddockanthropic.Options{})
//
// Run closes the session when it returns, so the conversation's sandbox is
// deleted even after an error or a panic; a session made with
// tooluse.PerCall() uses a fresh sandbox for every call instead.
//
// The package is named paddockanthropic, not anthropic, so that it and the
// SDK can be imported side by side without renaming either.
package paddockanthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// DefaultMaxTurns is the number of model calls Run makes at most when
// Options.MaxTurns is zero.
const DefaultMaxTurns = 20

// ErrMaxTurns is returned (wrapped) by Run and RunStreaming when the model
// still asks for tools after Options.MaxTurns calls.
var ErrMaxTurns = errors.New("paddockanthropic: turn limit reached")

// Executor executes tool calls; see tooluse.Executor.
type Executor = tooluse.Executor

// Options configure Run and RunStreaming. The zero value works.
type Options struct {
	// MaxTurns bounds the number of model calls (default DefaultMaxTurns).
	MaxTurns int
	// KeepSession leaves the session open when Run returns, so that a
	// later Run can continue the conversation in the same sandbox. The
	// caller then closes it.
	KeepSession bool
	// OnMessage, when set, is called with each assistant message.
	OnMessage func(msg *anthropic.Message)
	// OnToolCall, when set, is called after each tool call.
	OnToolCall func(name string, input json.RawMessage, res tooluse.Result)
	// OnEvent, when set, is called by RunStreaming with each stream event
	// (for example to print text deltas as they arrive).
	OnEvent func(ev anthropic.MessageStreamEventUnion)
	// RequestOptions are passed to every Messages API call.
	RequestOptions []option.RequestOption
}

// Tools converts Paddock tool definitions to Messages API tools.
func Tools(tools []tooluse.Tool) []anthropic.ToolUnionParam {
	out := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		schema := anthropic.ToolInputSchemaParam{}
		for k, v := range t.InputSchema {
			switch k {
			case "type": // always "object"
			case "properties":
				schema.Properties = v
			case "required":
				schema.Required = stringList(v)
			default:
				if schema.ExtraFields == nil {
					schema.ExtraFields = map[string]any{}
				}
				schema.ExtraFields[k] = v
			}
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return out
}

func stringList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, s := range l {
			if str, ok := s.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// ToolResults executes the tool_use blocks of msg one after the other and
// returns the user message answering them: one tool_result block per
// tool_use block, in the same order and with the same id, is_error set
// from the result, and nothing before them. ok is false when msg has no
// tool_use block.
func ToolResults(ctx context.Context, exec Executor, msg *anthropic.Message) (reply anthropic.MessageParam, ok bool) {
	return toolResults(ctx, exec, msg, nil)
}

func toolResults(ctx context.Context, exec Executor, msg *anthropic.Message,
	hook func(string, json.RawMessage, tooluse.Result)) (anthropic.MessageParam, bool) {
	var blocks []anthropic.ContentBlockParamUnion
	for _, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		res := exec.Call(ctx, b.Name, b.Input)
		if hook != nil {
			hook(b.Name, b.Input, res)
		}
		blocks = append(blocks, ResultBlock(b.ID, res))
	}
	if len(blocks) == 0 {
		return anthropic.MessageParam{}, false
	}
	return anthropic.NewUserMessage(blocks...), true
}

// ResultBlock returns the tool_result block answering the tool_use block
// id with res. An empty result is sent without content, since the API
// rejects empty text blocks.
func ResultBlock(id string, res tooluse.Result) anthropic.ContentBlockParamUnion {
	if res.Text == "" {
		return anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
			ToolUseID: id, IsError: anthropic.Bool(res.IsError),
		}}
	}
	if len(res.Images) == 0 {
		return anthropic.NewToolResultBlock(id, res.Text, res.IsError)
	}
	// Figures of run_code go back as image blocks inside the tool_result.
	content := []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: res.Text}}}
	for _, img := range res.Images {
		content = append(content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{
			Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
				MediaType: anthropic.Base64ImageSourceMediaType(img.MediaType), Data: img.Data,
			}},
		}})
	}
	return anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{
		ToolUseID: id, IsError: anthropic.Bool(res.IsError), Content: content,
	}}
}

// Run drives the conversation params.Messages: it calls the Messages API,
// appends the assistant message, executes its tool calls with session and
// appends their results, until the model stops for another reason than
// tool_use. It returns the last assistant message and the whole
// conversation (params.Messages followed by the new messages).
//
// When params.Tools is empty it offers session.Tools(). Run closes session
// when it returns, unless opts.KeepSession is set. After an error it
// returns the conversation so far; when the model still asks for tools
// after opts.MaxTurns calls, the error wraps ErrMaxTurns and the
// conversation ends with the last tool results, ready to be continued.
func Run(ctx context.Context, client anthropic.Client, params anthropic.MessageNewParams, session Executor,
	opts Options) (*anthropic.Message, []anthropic.MessageParam, error) {
	return run(ctx, params, session, opts, func(ctx context.Context, p anthropic.MessageNewParams) (*anthropic.Message, error) {
		return client.Messages.New(ctx, p, opts.RequestOptions...)
	})
}

// RunStreaming is Run with streamed responses (Messages.NewStreaming):
// each message is accumulated from its events, which are also passed to
// opts.OnEvent as they arrive.
func RunStreaming(ctx context.Context, client anthropic.Client, params anthropic.MessageNewParams, session Executor,
	opts Options) (*anthropic.Message, []anthropic.MessageParam, error) {
	return run(ctx, params, session, opts, func(ctx context.Context, p anthropic.MessageNewParams) (*anthropic.Message, error) {
		stream := client.Messages.NewStreaming(ctx, p, opts.RequestOptions...)
		defer stream.Close()
		var msg anthropic.Message
		for stream.Next() {
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				return nil, err
			}
			if opts.OnEvent != nil {
				opts.OnEvent(ev)
			}
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		if msg.StopReason == "" {
			return nil, errors.New("the stream ended before message_stop")
		}
		return &msg, nil
	})
}

type createFunc func(context.Context, anthropic.MessageNewParams) (*anthropic.Message, error)

func run(ctx context.Context, params anthropic.MessageNewParams, session Executor, opts Options,
	create createFunc) (*anthropic.Message, []anthropic.MessageParam, error) {
	if !opts.KeepSession {
		defer session.Close()
	}
	if len(params.Tools) == 0 {
		params.Tools = Tools(session.Tools())
	}
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	conv := slices.Clone(params.Messages)
	var last *anthropic.Message
	for turn := 1; turn <= maxTurns; turn++ {
		params.Messages = conv
		msg, err := create(ctx, params)
		if err != nil {
			return last, conv, fmt.Errorf("paddockanthropic: turn %d: %w", turn, err)
		}
		last = msg
		conv = append(conv, msg.ToParam())
		if opts.OnMessage != nil {
			opts.OnMessage(msg)
		}
		if msg.StopReason != anthropic.StopReasonToolUse {
			return msg, conv, nil
		}
		reply, ok := toolResults(ctx, session, msg, opts.OnToolCall)
		if !ok {
			return msg, conv, nil
		}
		conv = append(conv, reply)
	}
	return last, conv, fmt.Errorf("%w: the model still asked for tools after %d turns", ErrMaxTurns, maxTurns)
}

// Text returns the text blocks of msg joined by newlines ("" for nil).
func Text(msg *anthropic.Message) string {
	var s string
	if msg == nil {
		return ""
	}
	for _, b := range msg.Content {
		if b.Type == "text" {
			if s != "" {
				s += "\n"
			}
			s += b.Text
		}
	}
	return s
}
