package tooluse

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func TestTools(t *testing.T) {
	tools := Tools(Options{})
	if len(tools) != 4 {
		t.Fatalf("%d tools", len(tools))
	}
	for _, tl := range tools {
		if tl.InputSchema["type"] != "object" || tl.Description == "" {
			t.Errorf("%s: bad definition", tl.Name)
		}
		if _, err := json.Marshal(tl.InputSchema); err != nil {
			t.Error(err)
		}
	}
	if got := Tools(Options{Tools: []string{RunCommand}}); len(got) != 1 || got[0].Name != RunCommand {
		t.Fatalf("selection: %+v", got)
	}
}

func TestFormatExec(t *testing.T) {
	zero, one := 0, 1
	sig := "SIGKILL"
	cases := []struct {
		name    string
		res     api.ExecResult
		budget  int
		isError bool
		check   func(ExecOutput) bool
	}{
		{"ok", api.ExecResult{ExitCode: &zero, Stdout: "hi\n"}, 100, false, func(o ExecOutput) bool { return o.Stdout == "hi\n" }},
		{"exit 1", api.ExecResult{ExitCode: &one, Stderr: "Traceback"}, 100, true, func(o ExecOutput) bool { return o.Stderr == "Traceback" }},
		{"timeout", api.ExecResult{Signal: &sig, TimedOut: true}, 100, true, func(o ExecOutput) bool { return o.TimedOut && o.ExitCode == nil }},
		{"cut", api.ExecResult{ExitCode: &zero, Stdout: strings.Repeat("a", 500) + strings.Repeat("z", 500)}, 100, false,
			func(o ExecOutput) bool {
				return o.StdoutTruncated && strings.HasPrefix(o.Stdout, "aaaa") && strings.HasSuffix(o.Stdout, "zzzz") && strings.Contains(o.Stdout, "900 characters cut")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := FormatExec(&c.res, c.budget)
			var o ExecOutput
			if err := json.Unmarshal([]byte(r.Text), &o); err != nil {
				t.Fatal(err)
			}
			if r.IsError != c.isError || !c.check(o) {
				t.Fatalf("got %+v %s", r.IsError, r.Text)
			}
		})
	}
}
