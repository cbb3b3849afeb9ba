package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/fakemodel"
	"github.com/paddock-sandbox/paddock/tooluse"
	paddockanthropic "github.com/paddock-sandbox/paddock/tooluse/anthropic"
	paddockopenai "github.com/paddock-sandbox/paddock/tooluse/openai"
)

// The scripted model of the tool-use tests: its first program leaves a note
// in /workspace and crashes with a traceback; once it has read the
// traceback (and, on Anthropic, is_error) it runs a fixed program that also
// says whether the note is still there (it is with one sandbox per
// conversation, not with one per call); then it answers with the output.
const (
	buggyCode = "open('/workspace/note.txt', 'w').write('first call')\nvalues = [3, 1, 2]\nprint(sorted(values)[3])\n"
	fixedCode = "import os\nvalues = [3, 1, 2]\nprint(sorted(values)[-1], os.path.exists('/workspace/note.txt'))\n"
)

func fixTheTraceback(st fakemodel.State) fakemodel.Turn {
	runPython := func(code string) fakemodel.Turn {
		return fakemodel.Turn{Calls: []fakemodel.Call{{Name: tooluse.RunPython, Input: map[string]string{"code": code}}}}
	}
	if st.Turn == 0 {
		return runPython(buggyCode)
	}
	if len(st.Results) != 1 {
		return fakemodel.Turn{Text: fmt.Sprintf("UNEXPECTED: %d results", len(st.Results))}
	}
	out, err := st.Results[0].Exec()
	switch {
	case err != nil:
		return fakemodel.Turn{Text: "UNEXPECTED result: " + st.Results[0].Content}
	case st.Turn == 1:
		failed := out.ExitCode != nil && *out.ExitCode != 0 && strings.Contains(out.Stderr, "Traceback") &&
			strings.Contains(out.Stderr, "IndexError: list index out of range")
		if !failed || (st.API == fakemodel.Anthropic && !st.Results[0].IsError) {
			return fakemodel.Turn{Text: "UNEXPECTED first result: " + st.Results[0].Content}
		}
		return runPython(fixedCode)
	case out.ExitCode == nil || *out.ExitCode != 0 || st.Results[0].IsError:
		return fakemodel.Turn{Text: "UNEXPECTED second result: " + st.Results[0].Content}
	}
	return fakemodel.Turn{Text: "Answer: " + strings.TrimSpace(out.Stdout)}
}

// toolUseRun is one conversation through one API: it returns the final
// text.
type toolUseRun func(ctx context.Context, baseURL string, s *tooluse.Session) (string, error)

func anthropicRun(stream bool) toolUseRun {
	return func(ctx context.Context, baseURL string, s *tooluse.Session) (string, error) {
		c := anthropic.NewClient(anthropicoption.WithBaseURL(baseURL), anthropicoption.WithAPIKey("test"), anthropicoption.WithMaxRetries(0))
		p := anthropic.MessageNewParams{Model: anthropic.ModelClaudeSonnet5_5, MaxTokens: 1024,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the largest value?"))}}
		run := paddockanthropic.Run
		if stream {
			run = paddockanthropic.RunStreaming
		}
		msg, _, err := run(ctx, c, p, s, paddockanthropic.Options{})
		return paddockanthropic.Text(msg), err
	}
}

func openAIClient(baseURL string) openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(baseURL+"/v1"), openaioption.WithAPIKey("test"), openaioption.WithMaxRetries(0))
}

func chatRun(ctx context.Context, baseURL string, s *tooluse.Session) (string, error) {
	cc, _, err := paddockopenai.RunChat(ctx, openAIClient(baseURL), openai.ChatCompletionNewParams{Model: openai.ChatModelGPT5_5,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the largest value?")}}, s, paddockopenai.Options{})
	if err != nil {
		return "", err
	}
	return cc.Choices[0].Message.Content, nil
}

func responsesRun(ctx context.Context, baseURL string, s *tooluse.Session) (string, error) {
	resp, err := paddockopenai.RunResponses(ctx, openAIClient(baseURL), responses.ResponseNewParams{Model: openai.ChatModelGPT5_5,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the largest value?")}}, s, paddockopenai.Options{})
	if err != nil {
		return "", err
	}
	return resp.OutputText(), nil
}

// conversationSession returns a session on the shared daemon whose
// sandboxes carry a metadata pair unique to the test.
func conversationSession(t *testing.T, perCall bool) (*tooluse.Session, map[string]string) {
	meta := map[string]string{"conversation": strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())}
	sopts := []tooluse.SessionOption{tooluse.WithCreateRequest(&api.CreateSandboxRequest{Metadata: meta, TimeoutSeconds: 600})}
	if perCall {
		sopts = append(sopts, tooluse.PerCall())
	}
	return tooluse.NewSession(shared.client(0), tooluse.Options{}, sopts...), meta
}

// sandboxes counts the sandboxes with meta: all of them, and those not
// terminated.
func sandboxes(t *testing.T, meta map[string]string) (all, live int) {
	t.Helper()
	c := shared.client(0)
	for _, state := range []string{"all", ""} {
		for sb, err := range c.All(ctxT(t), client.ListOptions{State: state, Metadata: meta}) {
			if err != nil {
				t.Fatal(err)
			}
			if state == "all" {
				all++
			} else if sb.State != api.StateTerminated {
				live++
			}
		}
	}
	return all, live
}

func TestToolUseConversations(t *testing.T) {
	requireDaemon(t)
	cases := []struct {
		name    string
		run     toolUseRun
		perCall bool
		answer  string
		created int // sandboxes
	}{
		{"anthropic", anthropicRun(false), false, "Answer: 3 True", 1},
		{"anthropic-streaming", anthropicRun(true), false, "Answer: 3 True", 1},
		{"chat-completions", chatRun, false, "Answer: 3 True", 1},
		{"responses", responsesRun, false, "Answer: 3 True", 1},
		{"anthropic-per-call", anthropicRun(false), true, "Answer: 3 False", 2},
		{"responses-per-call", responsesRun, true, "Answer: 3 False", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakemodel.New(fixTheTraceback)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			session, meta := conversationSession(t, tc.perCall)
			answer, err := tc.run(ctxT(t), srv.URL, session)
			if err != nil {
				t.Fatal(err)
			}
			if answer != tc.answer {
				t.Fatalf("answer %q, want %q", answer, tc.answer)
			}
			reqs := fake.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests", len(reqs))
			}
			for i, r := range reqs {
				if r.Status != 200 || r.State.Turn != i {
					t.Errorf("request %d: status %d %s, turn %d", i, r.Status, r.Error, r.State.Turn)
				}
				if r.Stream != (tc.name == "anthropic-streaming") {
					t.Errorf("request %d: stream %v", i, r.Stream)
				}
			}
			if tc.name == "responses" {
				checkResponseChain(t, reqs)
			}
			if all, live := sandboxes(t, meta); all != tc.created || live != 0 {
				t.Fatalf("%d sandboxes created (want %d), %d still running", all, tc.created, live)
			}
		})
	}
}

// checkResponseChain checks that each Responses request after the first
// continues the previous one with previous_response_id and answers its
// function call with a function_call_output of the same call_id.
func checkResponseChain(t *testing.T, reqs []fakemodel.Request) {
	t.Helper()
	for i := 1; i < len(reqs); i++ {
		var body struct {
			PreviousResponseID string `json:"previous_response_id"`
			Input              []struct {
				Type   string `json:"type"`
				CallID string `json:"call_id"`
			} `json:"input"`
		}
		if err := json.Unmarshal(reqs[i].Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.PreviousResponseID == "" || len(body.Input) != 1 || body.Input[0].Type != "function_call_output" ||
			body.Input[0].CallID != reqs[i].State.Results[0].CallID {
			t.Errorf("request %d: %s", i, reqs[i].Body)
		}
	}
}

// scriptedFailure reports whether err is the API error the fake was
// scripted to answer with, as the SDK reports it.
func scriptedFailure(err error) bool {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode == 400 && oe.Type == "invalid_request_error" && oe.Message == "scripted failure"
	}
	var ae *anthropic.Error
	return errors.As(err, &ae) && ae.StatusCode == 400 && strings.Contains(ae.Error(), "scripted failure")
}

// TestToolUseCleanup checks that the conversation's sandbox is deleted when
// the loop ends with an error: the model API failing, or the turn cap.
func TestToolUseCleanup(t *testing.T) {
	requireDaemon(t)
	call := fakemodel.Turn{Calls: []fakemodel.Call{{Name: tooluse.RunCommand, Input: map[string]string{"command": "echo hi > f; cat f"}}}}
	failing := fakemodel.Replies(call, fakemodel.Turn{Error: &fakemodel.Error{Status: 400, Type: "invalid_request_error", Message: "scripted failure"}})
	forever := func(fakemodel.State) fakemodel.Turn { return call }
	cases := []struct {
		name   string
		run    toolUseRun
		script fakemodel.Script
		check  func(error) bool
	}{
		{"anthropic-api-error", anthropicRun(false), failing, scriptedFailure},
		{"anthropic-streaming-api-error", anthropicRun(true), failing, scriptedFailure},
		{"chat-api-error", chatRun, failing, scriptedFailure},
		{"responses-api-error", responsesRun, failing, scriptedFailure},
		{"anthropic-turn-cap", anthropicRun(false), forever, func(err error) bool { return errors.Is(err, paddockanthropic.ErrMaxTurns) }},
		{"chat-turn-cap", chatRun, forever, func(err error) bool { return errors.Is(err, paddockopenai.ErrMaxTurns) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(fakemodel.New(tc.script))
			defer srv.Close()
			session, meta := conversationSession(t, false)
			_, err := tc.run(ctxT(t), srv.URL, session)
			if err == nil || !tc.check(err) {
				t.Fatalf("error %v", err)
			}
			if all, live := sandboxes(t, meta); all != 1 || live != 0 {
				t.Fatalf("%d sandboxes created, %d still running", all, live)
			}
		})
	}
}
