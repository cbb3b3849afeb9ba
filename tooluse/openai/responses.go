package paddockopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// ResponseTools converts Paddock tool definitions to Responses API function
// tools, with strict set when their schemas allow it (Paddock's own always
// do: additionalProperties false and every property required).
func ResponseTools(tools []tooluse.Tool) []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		fn := responses.FunctionToolParam{Name: t.Name, Parameters: t.InputSchema, Strict: openai.Bool(Strict(t.InputSchema))}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		out = append(out, responses.ToolUnionParam{OfFunction: &fn})
	}
	return out
}

// FunctionCallOutputs executes the function_call items of resp one after
// the other and returns one function_call_output item per call, in the
// same order and with the matching call_id. It returns nil when resp has
// no function call.
func FunctionCallOutputs(ctx context.Context, exec Executor, resp *responses.Response) []responses.ResponseInputItemUnionParam {
	return functionCallOutputs(ctx, exec, resp, nil)
}

func functionCallOutputs(ctx context.Context, exec Executor, resp *responses.Response,
	hook func(string, json.RawMessage, tooluse.Result)) []responses.ResponseInputItemUnionParam {
	var out []responses.ResponseInputItemUnionParam
	for _, item := range resp.Output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		res := call(ctx, exec, fc.Name, fc.Arguments, hook)
		out = append(out, responses.ResponseInputItemUnionParam{
			OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(fc.CallID),
				Output: callOutput(res),
			},
		})
	}
	return out
}

// RunResponses drives a Responses API conversation starting with params:
// it creates a response, executes its function calls with session and
// continues with a request whose input is their function_call_output
// items and whose previous_response_id is the response's id (every other
// field of params, instructions and tools included, is sent again), until
// a response has no function call. It returns the last response.
//
// When params.Tools is empty it offers session.Tools() as strict function
// tools. The conversation state lives on OpenAI's side, so params.Store
// must not be false. RunResponses closes session when it returns, unless
// opts.KeepSession is set. When the model still calls functions after
// opts.MaxTurns responses, the error wraps ErrMaxTurns and those last calls
// are not executed.
func RunResponses(ctx context.Context, client openai.Client, params responses.ResponseNewParams, session Executor,
	opts Options) (*responses.Response, error) {
	if !opts.KeepSession {
		defer session.Close()
	}
	if params.Store.Valid() && !params.Store.Value {
		return nil, errors.New("paddockopenai: RunResponses continues with previous_response_id, which needs stored responses (Store must not be false)")
	}
	if len(params.Tools) == 0 {
		params.Tools = ResponseTools(session.Tools())
	}
	var last *responses.Response
	for turn := 1; turn <= opts.maxTurns(); turn++ {
		resp, err := client.Responses.New(ctx, params, opts.RequestOptions...)
		if err != nil {
			return last, fmt.Errorf("paddockopenai: turn %d: %w", turn, err)
		}
		last = resp
		if !hasFunctionCall(resp) {
			return resp, nil
		}
		if turn == opts.maxTurns() {
			break
		}
		params.PreviousResponseID = openai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{
			OfInputItemList: functionCallOutputs(ctx, session, resp, opts.OnToolCall),
		}
	}
	return last, fmt.Errorf("%w: the model still called functions after %d turns", ErrMaxTurns, opts.maxTurns())
}

func hasFunctionCall(resp *responses.Response) bool {
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			return true
		}
	}
	return false
}

// callOutput is a function_call_output's output: the text, or with images
// (run_code figures) a list of input_text and input_image items.
func callOutput(res tooluse.Result) responses.ResponseInputItemFunctionCallOutputOutputUnionParam {
	if len(res.Images) == 0 {
		return responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(res.Text)}
	}
	items := responses.ResponseFunctionCallOutputItemListParam{
		{OfInputText: &responses.ResponseInputTextContentParam{Text: res.Text}},
	}
	for _, img := range res.Images {
		items = append(items, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
			ImageURL: openai.String("data:" + img.MediaType + ";base64," + img.Data),
		}})
	}
	return responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfResponseFunctionCallOutputItemArray: items}
}
