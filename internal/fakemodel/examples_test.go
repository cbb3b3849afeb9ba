package fakemodel

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// run is the JSON a run_* tool returns.
func run(exit int, stdout, stderr string) string {
	b, _ := json.Marshal(map[string]any{"exit_code": exit, "timed_out": false, "stdout": stdout, "stderr": stderr})
	return string(b)
}

func TestExamplesScript(t *testing.T) {
	nameErr := run(1, "", "Traceback...\nNameError: name 'prime' is not defined")
	for _, tc := range []struct {
		name     string
		st       State
		wantText string // substring of the reply text
		wantCall string // substring of the first call's input
		wantErr  string // substring of the refusal
	}{
		{name: "primes turn 0", st: State{API: Anthropic, Tools: []string{"run_python"}},
			wantCall: "print(prime(1000)[-1])"},
		{name: "primes turn 1", st: State{API: Anthropic, Tools: []string{"run_python"}, Turn: 1,
			Results: []Result{{Content: nameErr, IsError: true}, {Content: run(0, "3\n", "")}}},
			wantCall: "print(primes(1000)[-1])"},
		{name: "primes failure without is_error", st: State{API: Anthropic, Tools: []string{"run_python"}, Turn: 1,
			Results: []Result{{Content: nameErr}, {Content: run(0, "3\n", "")}}},
			wantErr: "is_error: true"},
		{name: "primes one result", st: State{API: Anthropic, Tools: []string{"run_python"}, Turn: 1,
			Results: []Result{{Content: nameErr, IsError: true}}},
			wantErr: "expected 2 tool results"},
		{name: "primes answer", st: State{API: Anthropic, Tools: []string{"run_python"}, Turn: 2,
			Results: []Result{{Content: run(0, "7919\n", "")}}},
			wantText: "The 1000th prime number is 7919."},
		{name: "sieve limit from the prompt", st: State{API: Anthropic, Tools: []string{"run_command"},
			Prompt: "count the primes below 10,000,000 with a sieve"},
			wantCall: "const int n = 10000000;"},
		{name: "sieve default limit", st: State{API: Anthropic, Tools: []string{"run_command"}},
			wantCall: "const int n = 1000000;"},
		{name: "sieve gcc error", st: State{API: Anthropic, Tools: []string{"run_command"}, Turn: 1,
			Results: []Result{{Content: run(1, "", "sieve.c:16:5: error: expected ';' before 'free'"), IsError: true}}},
			wantCall: "largest);\n"},
		{name: "sieve answer", st: State{API: Anthropic, Tools: []string{"run_command"}, Turn: 2,
			Results: []Result{{Content: run(0, "78498 primes below 1000000, the largest is 999983\n", "")}}},
			wantText: "The sieve finds 78498 primes below 1000000; the largest is 999983."},
		{name: "fibonacci turn 1", st: State{API: Responses, Tools: []string{"run_python"}, Turn: 1,
			Results: []Result{{Content: run(1, "", "SyntaxError: '(' was never closed")}}},
			wantCall: "print(fib(40))"},
		{name: "fibonacci wants the error", st: State{API: Chat, Tools: []string{"run_python"}, Turn: 1,
			Results: []Result{{Content: run(0, "", "")}}},
			wantErr: "SyntaxError must reach"},
		{name: "fibonacci answer", st: State{API: Responses, Tools: []string{"run_python"}, Turn: 2,
			Results: []Result{{Content: run(0, "102334155\n", "")}}},
			wantText: "The 40th Fibonacci number is 102334155."},
		{name: "not JSON", st: State{API: Responses, Tools: []string{"run_python"}, Turn: 2,
			Results: []Result{{Content: "oops"}}},
			wantErr: "not the JSON of a run"},
		{name: "no tools", st: State{API: Responses, Turn: 1}, wantErr: "not carried over"},
		{name: "past the end", st: State{API: Anthropic, Tools: []string{"run_python"}, Turn: 3}, wantErr: "past its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turn := Examples()(tc.st)
			if tc.wantErr != "" {
				if turn.Error == nil || turn.Error.Status != 400 || !strings.Contains(turn.Error.Message, tc.wantErr) {
					t.Fatalf("turn %+v, want a 400 with %q", turn, tc.wantErr)
				}
				return
			}
			if turn.Error != nil {
				t.Fatalf("refused: %s", turn.Error.Message)
			}
			if !strings.Contains(turn.Text, tc.wantText) {
				t.Errorf("text %q, want %q", turn.Text, tc.wantText)
			}
			if tc.wantCall != "" && (len(turn.Calls) == 0 || !strings.Contains(string(inputJSON(turn.Calls[0])), strings.ReplaceAll(tc.wantCall, "\n", `\n`))) {
				t.Errorf("calls %+v, want an input with %q", turn.Calls, tc.wantCall)
			}
		})
	}
}

// TestExamplesOverHTTP plays the Fibonacci conversation through the
// Responses API, as the example programs do.
func TestExamplesOverHTTP(t *testing.T) {
	srv := httptest.NewServer(New(Examples(), CheckReplays()))
	defer srv.Close()
	tools := `[{"type":"function","name":"run_python","strict":true,"parameters":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"],"additionalProperties":false}}]`
	next := func(prev, output string) map[string]any {
		t.Helper()
		body := `{"model":"m","tools":` + tools + `,"input":"What is fib(40)?"}`
		if prev != "" {
			b, _ := json.Marshal([]any{map[string]any{"type": "function_call_output", "call_id": output[:strings.IndexByte(output, ' ')], "output": output[strings.IndexByte(output, ' ')+1:]}})
			body = `{"model":"m","tools":` + tools + `,"previous_response_id":"` + prev + `","input":` + string(b) + `}`
		}
		status, out := post(t, srv.URL, "/v1/responses", body, bearerHeader)
		if status != 200 {
			t.Fatalf("status %d: %v", status, out)
		}
		return out
	}
	callID := func(r map[string]any) string { return r["output"].([]any)[0].(map[string]any)["call_id"].(string) }
	r0 := next("", "")
	r1 := next(r0["id"].(string), callID(r0)+" "+run(1, "", "SyntaxError: '(' was never closed"))
	r2 := next(r1["id"].(string), callID(r1)+" "+run(0, "102334155\n", ""))
	b, _ := json.Marshal(r2["output"])
	if !strings.Contains(string(b), "The 40th Fibonacci number is 102334155.") {
		t.Fatalf("answer %s", b)
	}
}
