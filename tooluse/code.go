package tooluse

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// RunCode is the stateful code tool: cells run in the sandbox's code
// contexts, so variables, imports and loaded data survive between calls,
// and figures come back as images. It is offered when Options.Tools lists
// it.
const RunCode = "run_code"

// DefaultImageBudget is Options.ImageBudget when left 0: the base64 bytes
// of images one tool result may carry.
const DefaultImageBudget = 2 << 20

// maxImages bounds the images of one tool result.
const maxImages = 4

// Image is an image a tool call produced (a chart), for the adapters that
// can show it to the model: Anthropic tool_result image blocks, OpenAI
// Responses input_image, MCP ImageContent. OpenAI Chat tool messages get a
// note instead (ImageNote).
type Image struct {
	MediaType string // image/png or image/jpeg
	Data      string // base64
}

func runCodeTool(env string) Tool {
	return Tool{
		Name: RunCode,
		Description: "Run a cell of code in a stateful interpreter in a sandbox, like a notebook: variables, imports " +
			"and loaded data stay for later calls. Returns stdout, stderr, the value of the last expression and " +
			"any error; matplotlib figures (no plt.show() needed) come back as images. numpy, pandas and " +
			"matplotlib are installed. " + env,
		InputSchema: object(map[string]any{
			"code": map[string]any{"type": "string", "description": "The code to run."},
			"language": map[string]any{"type": "string", "enum": []string{"python", "javascript", "bash"},
				"description": "The interpreter (default python); each language has its own state."},
		}, "code"),
	}
}

// CodeOutput is the JSON the run_code tool returns to the model.
type CodeOutput struct {
	ExecutionCount  int            `json:"execution_count"`
	Stdout          string         `json:"stdout"`
	Stderr          string         `json:"stderr"`
	StdoutTruncated bool           `json:"stdout_truncated,omitempty"`
	StderrTruncated bool           `json:"stderr_truncated,omitempty"`
	Result          string         `json:"result,omitempty"`
	Outputs         []string       `json:"outputs,omitempty"`
	Error           *api.CodeError `json:"error,omitempty"`
	TimedOut        bool           `json:"timed_out,omitempty"`
	Restarted       bool           `json:"restarted,omitempty"`
	Images          []string       `json:"images,omitempty"`
}

// runCode runs a run_code call.
func (s *Session) runCode(ctx context.Context, sb *client.Sandbox, input json.RawMessage) Result {
	var args struct {
		Code     *string `json:"code"`
		Language string  `json:"language"`
	}
	if err := json.Unmarshal(input, &args); err != nil {
		return errResult("invalid tool input: %v", err)
	}
	if args.Code == nil {
		return errResult("%s: missing required field %q", RunCode, "code")
	}
	res, err := sb.RunCode(ctx, &api.CodeRequest{Code: *args.Code, Language: args.Language, TimeoutSeconds: s.opts.Timeout.Seconds()})
	if err != nil {
		return errResult("the sandbox could not run the code: %v", err)
	}
	return FormatCode(res, s.opts.OutputBudget, s.opts.ImageBudget)
}

// FormatCode renders a code execution for the model: JSON text with the
// output within budget characters, the last expression's value and the
// cell's error, plus up to four PNG/JPEG images within imageBudget base64
// bytes (the others are named in the text). An error sets IsError.
func FormatCode(res *api.CodeExecution, budget, imageBudget int) Result {
	if budget <= 0 {
		budget = 20000
	}
	if imageBudget <= 0 {
		imageBudget = DefaultImageBudget
	}
	ex := FormatExec(&api.ExecResult{ExitCode: new(int), Stdout: res.Stdout, Stderr: res.Stderr,
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}, budget*3/4)
	var o ExecOutput
	_ = json.Unmarshal([]byte(ex.Text), &o)
	out := CodeOutput{ExecutionCount: res.ExecutionCount, Stdout: o.Stdout, Stderr: o.Stderr,
		StdoutTruncated: o.StdoutTruncated, StderrTruncated: o.StderrTruncated, TimedOut: res.TimedOut, Restarted: res.Restarted}
	var images []Image
	left := budget / 4
	for _, r := range res.Results {
		text, _ := truncateMiddle(strings.ToValidUTF8(r.Data["text/plain"], "\uFFFD"), max(left, 200))
		left -= len(text)
		if r.IsMainResult {
			out.Result = text
		}
		for _, mt := range []string{"image/png", "image/jpeg"} {
			data, ok := r.Data[mt]
			if !ok {
				continue
			}
			switch {
			case len(images) >= maxImages:
				out.Images = append(out.Images, fmt.Sprintf("%s of %d bytes not shown: at most %d images per call", mt, len(data), maxImages))
			case len(data) > imageBudget:
				out.Images = append(out.Images, fmt.Sprintf("%s of %d bytes not shown: over the %d-byte image budget; save it to a file or make it smaller", mt, len(data), imageBudget))
			default:
				imageBudget -= len(data)
				images = append(images, Image{MediaType: mt, Data: data})
				out.Images = append(out.Images, fmt.Sprintf("%s shown as image %d", mt, len(images)))
			}
			break
		}
		for mt, n := range r.Omitted {
			out.Images = append(out.Images, fmt.Sprintf("%s of %d bytes left out by the sandbox: too large", mt, n))
		}
		if !r.IsMainResult && text != "" {
			out.Outputs = append(out.Outputs, text)
		}
	}
	if res.Error != nil {
		e := *res.Error
		e.Traceback, _ = truncateMiddle(e.Traceback, budget/4)
		out.Error = &e
	}
	b, _ := json.Marshal(out)
	return Result{Text: string(b), IsError: res.Error != nil, Images: images}
}

// ImageNote is res.Text with a note about its images, for APIs whose tool
// results cannot carry images (OpenAI Chat tool messages).
func ImageNote(res Result) string {
	if len(res.Images) == 0 {
		return res.Text
	}
	return fmt.Sprintf("%s\n[%d image(s) produced; this API cannot show images in tool results, describe the data in text instead]", res.Text, len(res.Images))
}

// AllToolNames lists every tool, run_code included, for Options.Tools.
func AllToolNames() []string {
	return []string{RunPython, RunCommand, WriteFile, ReadFile, RunCode}
}
