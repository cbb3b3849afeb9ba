package paddockanthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

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

// fixTraceback is the script of the tests: a failing call, a fix once the
// model sees is_error and the traceback, then the answer.
func fixTraceback(st fakemodel.State) fakemodel.Turn {
	switch st.Turn {
	case 0:
		return fakemodel.Turn{Text: "Let me compute.", Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(1/0)"}}}}
	case 1:
		if len(st.Results) != 1 || !st.Results[0].IsError || !strings.Contains(st.Results[0].Content, "ZeroDivisionError") {
			return fakemodel.Turn{Text: "unexpected tool result"}
		}
		return fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(6*7)"}}}}
	}
	out, err := st.Results[0].Exec()
	if err != nil {
		return fakemodel.Turn{Text: "bad result: " + err.Error()}
	}
	return fakemodel.Turn{Text: "The answer is " + strings.TrimSpace(out.Stdout) + "."}
}

func newClient(t *testing.T, script fakemodel.Script) (anthropic.Client, *fakemodel.Server) {
	fake := fakemodel.New(script)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0)), fake
}

func params(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.ModelClaudeSonnet5_5, MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
}

func TestTools(t *testing.T) {
	for _, tool := range Tools(tooluse.Tools(tooluse.Options{})) {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"input_schema"`
		}
		json.Unmarshal(b, &got)
		s := got.InputSchema
		if got.Name == "" || got.Description == "" || s["type"] != "object" || s["additionalProperties"] != false ||
			s["properties"] == nil || len(s["required"].([]any)) == 0 {
			t.Errorf("bad tool JSON: %s", b)
		}
	}
}

func TestToolResults(t *testing.T) {
	var msg anthropic.Message
	err := json.Unmarshal([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","content":[
		{"type":"text","text":"two calls"},
		{"type":"tool_use","id":"toolu_a","name":"run_python","input":{"code":"print(1/0)"}},
		{"type":"tool_use","id":"toolu_b","name":"run_python","input":{"code":"print(6*7)"}}]}`), &msg)
	if err != nil {
		t.Fatal(err)
	}
	exec := &stubExec{}
	reply, ok := ToolResults(context.Background(), exec, &msg)
	if !ok {
		t.Fatal("no reply")
	}
	b, _ := json.Marshal(reply)
	var got struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   *bool  `json:"is_error"`
			Content   []struct{ Text string }
		} `json:"content"`
	}
	json.Unmarshal(b, &got)
	want := []struct {
		id      string
		isError bool
		text    string
	}{{"toolu_a", true, "ZeroDivisionError"}, {"toolu_b", false, `"stdout":"42\n"`}}
	if got.Role != "user" || len(got.Content) != len(want) {
		t.Fatalf("reply %s", b)
	}
	for i, w := range want {
		c := got.Content[i]
		if c.Type != "tool_result" || c.ToolUseID != w.id || c.IsError == nil || *c.IsError != w.isError ||
			len(c.Content) != 1 || !strings.Contains(c.Content[0].Text, w.text) {
			t.Errorf("block %d: %s", i, b)
		}
	}
	msg.Content = msg.Content[:1]
	if _, ok := ToolResults(context.Background(), exec, &msg); ok {
		t.Error("a message without tool_use was answered")
	}
	empty, _ := json.Marshal(ResultBlock("toolu_c", tooluse.Result{}))
	if strings.Contains(string(empty), `"content"`) || !strings.Contains(string(empty), `"is_error":false`) {
		t.Errorf("empty result block: %s", empty)
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(context.Context, anthropic.Client, anthropic.MessageNewParams, Executor, Options) (*anthropic.Message, []anthropic.MessageParam, error)
	}{{"messages", Run}, {"streaming", RunStreaming}} {
		t.Run(tc.name, func(t *testing.T) {
			c, fake := newClient(t, fixTraceback)
			exec := &stubExec{}
			var events int
			msg, conv, err := tc.run(context.Background(), c, params("What is 6*7?"), exec, Options{
				OnEvent: func(anthropic.MessageStreamEventUnion) { events++ },
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := Text(msg); got != "The answer is 42." {
				t.Fatalf("final text %q", got)
			}
			// user, assistant, results, assistant, results, assistant
			if len(conv) != 6 || len(exec.calls) != 2 || exec.closed != 1 {
				t.Fatalf("conversation %d messages, %d calls, closed %d", len(conv), len(exec.calls), exec.closed)
			}
			reqs := fake.Requests()
			for _, r := range reqs {
				if r.Status != 200 || r.Stream != (tc.name == "streaming") {
					t.Errorf("request answered %d (%s), stream %v", r.Status, r.Error, r.Stream)
				}
			}
			if len(reqs) != 3 || !reqs[1].State.Results[0].IsError || reqs[2].State.Results[0].IsError {
				t.Errorf("the model saw %+v", reqs)
			}
			if (events > 0) != (tc.name == "streaming") {
				t.Errorf("%d events", events)
			}
		})
	}
}

func TestRunLimits(t *testing.T) {
	always := func(fakemodel.State) fakemodel.Turn {
		return fakemodel.Turn{Calls: []fakemodel.Call{{Name: "run_python", Input: map[string]string{"code": "print(6*7)"}}}}
	}
	overloaded := fakemodel.Replies(always(fakemodel.State{}),
		fakemodel.Turn{Error: &fakemodel.Error{Status: 529, Type: "overloaded_error", Message: "Overloaded"}})
	cases := []struct {
		name     string
		script   fakemodel.Script
		opts     Options
		check    func(error) bool
		convLen  int
		requests int
	}{
		{"turn cap", always, Options{MaxTurns: 3}, func(err error) bool { return errors.Is(err, ErrMaxTurns) }, 7, 3},
		{"api error", overloaded, Options{}, func(err error) bool {
			var apiErr *anthropic.Error
			return errors.As(err, &apiErr) && apiErr.StatusCode == 529 && strings.Contains(err.Error(), "turn 2")
		}, 3, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fake := newClient(t, tc.script)
			exec := &stubExec{}
			_, conv, err := Run(context.Background(), c, params("loop"), exec, tc.opts)
			if !tc.check(err) {
				t.Fatalf("error %v", err)
			}
			if len(conv) != tc.convLen || len(fake.Requests()) != tc.requests || exec.closed != 1 {
				t.Fatalf("%d messages, %d requests, closed %d", len(conv), len(fake.Requests()), exec.closed)
			}
		})
	}
}

func TestRunClosesOnPanic(t *testing.T) {
	c, _ := newClient(t, fixTraceback)
	exec := &stubExec{}
	func() {
		defer func() { recover() }()
		Run(context.Background(), c, params("x"), exec, Options{
			OnToolCall: func(string, json.RawMessage, tooluse.Result) { panic("boom") },
		})
	}()
	if exec.closed != 1 {
		t.Fatalf("closed %d times", exec.closed)
	}
	exec2 := &stubExec{}
	if _, _, err := Run(context.Background(), c, params("x"), exec2, Options{KeepSession: true}); err != nil || exec2.closed != 0 {
		t.Fatalf("KeepSession: err %v, closed %d", err, exec2.closed)
	}
}
