package fakemodel

import (
	"testing"

	"github.com/paddock-sandbox/paddock/tooluse"
)

func TestExamplesUnderMCPNames(t *testing.T) {
	st := State{API: Anthropic, Tools: []string{"mcp__paddock__run_python", "mcp__other__read_file"}}
	turn := Examples()(st)
	if turn.Error != nil || len(turn.Calls) != 2 {
		t.Fatalf("turn 0: %+v", turn)
	}
	for _, c := range turn.Calls {
		if c.Name != "mcp__paddock__"+tooluse.RunPython {
			t.Fatalf("call named %q, want the offered mcp__paddock__run_python", c.Name)
		}
	}
	if got, _ := unprefixMCP(State{Tools: []string{"mcp__a__b__c", "plain", "mcp__x"}}); got.Tools[0] != "b__c" || got.Tools[1] != "plain" || got.Tools[2] != "mcp__x" {
		t.Fatalf("unprefixed tools %q", got.Tools)
	}
}

func TestExecIgnoresTrailingText(t *testing.T) {
	r := Result{Content: `{"exit_code":0,"stdout":"3\n"}` + "\n<system-reminder>\nx\n</system-reminder>"}
	out, err := r.Exec()
	if err != nil || out.Stdout != "3\n" {
		t.Fatalf("Exec = %+v, %v", out, err)
	}
}
