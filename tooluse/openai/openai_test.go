package paddockopenai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/paddock-sandbox/paddock/internal/fakemodel"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// stubExec is an Executor that fakes run_python: code containing "1/0"
// fails with a traceback, any other code "prints" 42.
type stubExec struct {
	mu     sync.Mutex
	calls  []string
	closed int
}

func (e *stubExec) Tools() []tooluse.Tool { return tooluse.Tools(tooluse.Options{}) }

func (e *stubExec) Call(_ context.Context, name string, input json.RawMessage) tooluse.Result {
	e.mu.Lock()
	e.calls = append(e.calls, name+" "+string(input))
	e.mu.Unlock()
	var in struct{ Code string }
	json.Unmarshal(input, &in)
	one, zero := 1, 0
	if strings.Contains(in.Code, "1/0") {
		b, _ := json.Marshal(tooluse.ExecOutput{ExitCode: &one, Stderr: "Traceback (most recent call last):\nZeroDivisionError: division by zero\n"})
		return tooluse.Result{Text: string(b), IsError: true}
	}
	b, _ := json.Marshal(tooluse.ExecOutput{ExitCode: &zero, Stdout: "42\n"})
	return tooluse.Result{Text: string(b)}
}

func (e *stubExec) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed++
	return nil
}

// fixTraceback fails first, fixes the code once it sees the traceback and
// answers with the output.
func fixTraceback(st fakemodel.State) fakemodel.Turn {
	switch st.Turn {
	case 0:
		return fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(1/0)"}}}}
	case 1:
		if out, err := st.Results[0].Exec(); err != nil || !strings.Contains(out.Stderr, "ZeroDivisionError") {
			return fakemodel.Turn{Text: "unexpected tool result"}
		}
		return fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(6*7)"}}}}
	}
	out, _ := st.Results[0].Exec()
	return fakemodel.Turn{Text: "The answer is " + strings.TrimSpace(out.Stdout) + "."}
}

func always(fakemodel.State) fakemodel.Turn {
	return fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(6*7)"}}}}
}

func newClient(t *testing.T, script fakemodel.Script) (openai.Client, *fakemodel.Server) {
	fake := fakemodel.New(script)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0)), fake
}

func TestToolConversion(t *testing.T) {
	loose := tooluse.Tool{Name: "loose", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"a": map[string]any{"type": "string"}}}}
	tools := append(tooluse.Tools(tooluse.Options{}), loose)
	chat, resp := ChatTools(tools), ResponseTools(tools)
	for i, tool := range tools {
		wantStrict := tool.Name != "loose"
		cb, _ := json.Marshal(chat[i])
		rb, _ := json.Marshal(resp[i])
		var c struct {
			Type     string
			Function struct {
				Name       string
				Strict     bool
				Parameters map[string]any
			}
		}
		var r struct {
			Type, Name string
			Strict     bool
			Parameters map[string]any
		}
		json.Unmarshal(cb, &c)
		json.Unmarshal(rb, &r)
		if c.Type != "function" || c.Function.Name != tool.Name || c.Function.Strict != wantStrict || c.Function.Parameters["type"] != "object" {
			t.Errorf("chat tool %s", cb)
		}
		if r.Type != "function" || r.Name != tool.Name || r.Strict != wantStrict || r.Parameters["type"] != "object" ||
			!strings.Contains(string(rb), `"strict":`) {
			t.Errorf("responses tool %s", rb)
		}
	}
}

func TestRunChat(t *testing.T) {
	cases := []struct {
		name    string
		script  fakemodel.Script
		opts    Options
		answer  string
		errIs   error
		convLen int
	}{
		// user, assistant, tool, assistant, tool, assistant
		{"fix traceback", fixTraceback, Options{}, "The answer is 42.", nil, 6},
		// user + 2 × (assistant, tool)
		{"turn cap", always, Options{MaxTurns: 2}, "", ErrMaxTurns, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fake := newClient(t, tc.script)
			exec := &stubExec{}
			cc, conv, err := RunChat(context.Background(), c, openai.ChatCompletionNewParams{
				Model:    openai.ChatModelGPT5_5,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 6*7?")},
			}, exec, tc.opts)
			if !errors.Is(err, tc.errIs) || (tc.errIs == nil && err != nil) {
				t.Fatalf("error %v", err)
			}
			if tc.answer != "" && cc.Choices[0].Message.Content != tc.answer {
				t.Fatalf("answer %q", cc.Choices[0].Message.Content)
			}
			if len(conv) != tc.convLen || exec.closed != 1 {
				t.Fatalf("%d messages, closed %d", len(conv), exec.closed)
			}
			for _, r := range fake.Requests() {
				if r.Status != 200 {
					t.Errorf("fake answered %d: %s", r.Status, r.Error)
				}
			}
		})
	}
}

func TestRunResponses(t *testing.T) {
	cases := []struct {
		name     string
		script   fakemodel.Script
		params   responses.ResponseNewParams
		opts     Options
		answer   string
		errText  string
		requests int
		calls    int
	}{
		{"fix traceback", fixTraceback, responses.ResponseNewParams{}, Options{}, "The answer is 42.", "", 3, 2},
		{"turn cap", always, responses.ResponseNewParams{}, Options{MaxTurns: 2}, "", "turn limit", 2, 1},
		{"store false", fixTraceback, responses.ResponseNewParams{Store: openai.Bool(false)}, Options{}, "", "Store must not be false", 0, 0},
		{"api error", fakemodel.Replies(always(fakemodel.State{}), fakemodel.Turn{Error: &fakemodel.Error{Status: 500, Message: "boom"}}),
			responses.ResponseNewParams{}, Options{}, "", "turn 2", 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fake := newClient(t, tc.script)
			exec := &stubExec{}
			p := tc.params
			p.Model = openai.ChatModelGPT5_5
			p.Instructions = openai.String("Use run_python.")
			p.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 6*7?")}
			resp, err := RunResponses(context.Background(), c, p, exec, tc.opts)
			if (tc.errText == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errText)) {
				t.Fatalf("error %v", err)
			}
			if tc.answer != "" && resp.OutputText() != tc.answer {
				t.Fatalf("answer %q", resp.OutputText())
			}
			reqs := fake.Requests()
			if len(reqs) != tc.requests || len(exec.calls) != tc.calls || exec.closed != 1 {
				t.Fatalf("%d requests, %d calls, closed %d", len(reqs), len(exec.calls), exec.closed)
			}
			for i, r := range reqs {
				var body struct {
					PreviousResponseID string `json:"previous_response_id"`
					Instructions       string `json:"instructions"`
				}
				json.Unmarshal(r.Body, &body)
				if (i > 0) != (body.PreviousResponseID != "") || body.Instructions == "" || (r.Status != 200 && tc.errText != "turn 2") {
					t.Errorf("request %d: %d %s %s", i, r.Status, r.Error, r.Body)
				}
			}
		})
	}
}

func TestStrict(t *testing.T) {
	obj := func(props map[string]any, required []any, extra bool) map[string]any {
		return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": extra}
	}
	str := map[string]any{"type": "string"}
	cases := []struct {
		name   string
		schema map[string]any
		want   bool
	}{
		{"all required", obj(map[string]any{"a": str}, []any{"a"}, false), true},
		{"optional property", obj(map[string]any{"a": str, "b": str}, []any{"a"}, false), false},
		{"additional properties", obj(map[string]any{"a": str}, []any{"a"}, true), false},
		{"nested loose", obj(map[string]any{"a": obj(map[string]any{"x": str}, nil, false)}, []any{"a"}, false), false},
		{"paddock", tooluse.Tools(tooluse.Options{})[2].InputSchema, true},
	}
	for _, tc := range cases {
		if got := Strict(tc.schema); got != tc.want {
			t.Errorf("%s: Strict = %v", tc.name, got)
		}
	}
}
