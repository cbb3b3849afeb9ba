// Package tooluse turns a Paddock sandbox into tools a model can call:
// canonical tool definitions (run_python, run_command, write_file,
// read_file, and run_code, the stateful code tool whose figures come back
// as images) and a Session that executes calls against one sandbox per
// conversation (created lazily, deleted by Close) or one per call.
//
// The adapters in tooluse/anthropic, tooluse/openai and tooluse/mcp map
// these definitions and results onto each API's wire format.
//
//	s := tooluse.NewSession(client.New("", ""), tooluse.Options{})
//	defer s.Close()
//	res := s.Call(ctx, "run_python", json.RawMessage(`{"code":"print(1)"}`))
//	// res.Text is the JSON result for the model; res.IsError marks failure.
package tooluse

import (
	"fmt"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

// Tool names.
const (
	RunPython  = "run_python"
	RunCommand = "run_command"
	WriteFile  = "write_file"
	ReadFile   = "read_file"
)

// Tool is a provider-neutral tool definition.
type Tool struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object (type "object").
	InputSchema map[string]any
}

// Options configure tool descriptions and execution. Zero values take
// defaults.
type Options struct {
	// Timeout bounds each call (default api.DefaultExecTimeoutSeconds).
	Timeout time.Duration
	// OutputBudget bounds the characters of stdout plus stderr returned to
	// the model (default 20000); the middle is cut, head and tail kept.
	OutputBudget int
	// MaxFileBytes bounds read_file results (default 100000 bytes).
	MaxFileBytes int
	// NetworkNote describes network access in the tool descriptions
	// (default: no internet access).
	NetworkNote string
	// Tools selects which tools to offer (default run_python, run_command,
	// write_file and read_file; add RunCode for the stateful code tool).
	Tools []string
	// ImageBudget bounds the base64 bytes of the images of one run_code
	// result (default DefaultImageBudget).
	ImageBudget int
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = api.DefaultExecTimeoutSeconds * time.Second
	}
	if o.OutputBudget <= 0 {
		o.OutputBudget = 20000
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 100000
	}
	if o.NetworkNote == "" {
		o.NetworkNote = "It has no internet access."
	}
	if o.ImageBudget <= 0 {
		o.ImageBudget = DefaultImageBudget
	}
	if len(o.Tools) == 0 {
		o.Tools = []string{RunPython, RunCommand, WriteFile, ReadFile}
	}
	return o
}

// Tools returns the tool definitions selected by opts.
func Tools(opts Options) []Tool {
	o := opts.withDefaults()
	env := fmt.Sprintf("The sandbox is a Linux machine (Debian) with python3, node, gcc, bash and git. "+
		"%s Files persist between calls in this conversation; the working directory is /workspace. "+
		"Each call may run for at most %s.", o.NetworkNote, o.Timeout.Round(time.Second))
	all := map[string]Tool{
		RunPython: {
			Name: RunPython,
			Description: "Run Python 3 code in a sandbox and return its exit code, stdout and stderr. " +
				"Use it to compute, test ideas and check your work; print what you want to see. " + env,
			InputSchema: object(map[string]any{
				"code": map[string]any{"type": "string", "description": "Python 3 source code to run as a script."},
			}, "code"),
		},
		RunCommand: {
			Name: RunCommand,
			Description: "Run a bash command in a sandbox and return its exit code, stdout and stderr. " +
				"Use it to compile and run programs, install packages, or inspect files. " + env,
			InputSchema: object(map[string]any{
				"command": map[string]any{"type": "string", "description": "A bash command line, run with bash -lc in /workspace."},
			}, "command"),
		},
		WriteFile: {
			Name:        WriteFile,
			Description: "Write a text file in the sandbox, creating parent directories. Relative paths are relative to /workspace. " + env,
			InputSchema: object(map[string]any{
				"path":    map[string]any{"type": "string", "description": "File path, absolute or relative to /workspace."},
				"content": map[string]any{"type": "string", "description": "The full file content."},
			}, "path", "content"),
		},
		RunCode: runCodeTool(env),
		ReadFile: {
			Name:        ReadFile,
			Description: fmt.Sprintf("Read a text file from the sandbox (at most %d bytes). Relative paths are relative to /workspace.", o.MaxFileBytes),
			InputSchema: object(map[string]any{
				"path": map[string]any{"type": "string", "description": "File path, absolute or relative to /workspace."},
			}, "path"),
		},
	}
	var out []Tool
	for _, n := range o.Tools {
		if t, ok := all[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

func object(props map[string]any, required ...string) map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// truncateMiddle keeps the head and tail of s within budget characters,
// with a marker saying how much was cut.
func truncateMiddle(s string, budget int) (string, bool) {
	if len(s) <= budget {
		return s, false
	}
	cut := len(s) - budget
	marker := fmt.Sprintf("\n[... %d characters cut ...]\n", cut)
	head := budget / 2
	tail := budget - head
	h, t := s[:head], s[len(s)-tail:]
	// Do not split UTF-8 sequences.
	h = strings.ToValidUTF8(h, "")
	t = strings.ToValidUTF8(t, "")
	return h + marker + t, true
}
