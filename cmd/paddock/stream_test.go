package main

import (
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
)

func TestExitStatus(t *testing.T) {
	code := func(n int) *int { return &n }
	sig := func(s string) *string { return &s }
	tests := []struct {
		name     string
		res      *api.ExecResult
		wantCode int
		wantMsg  string
	}{
		{"success", &api.ExecResult{ExitCode: code(0)}, 0, ""},
		{"failure", &api.ExecResult{ExitCode: code(3)}, 3, ""},
		{"killed by SIGKILL", &api.ExecResult{Signal: sig("SIGKILL")}, 137, ""},
		{"killed by SIGTERM", &api.ExecResult{Signal: sig("SIGTERM")}, 143, ""},
		{"numeric signal", &api.ExecResult{Signal: sig("2")}, 130, ""},
		{"unknown signal", &api.ExecResult{Signal: sig("SIGRTMIN+3")}, 1, "signal SIGRTMIN+3"},
		{"timeout wins", &api.ExecResult{TimedOut: true, Signal: sig("SIGKILL"), DurationMS: 60000}, 124, "timed out after 60.0s"},
		{"oom with signal", &api.ExecResult{OOMKilled: true, Signal: sig("SIGKILL")}, 137, "out of memory"},
		{"oom with exit code", &api.ExecResult{OOMKilled: true, ExitCode: code(137)}, 137, "out of memory"},
		{"oom alone", &api.ExecResult{OOMKilled: true}, 137, "out of memory"},
		{"no status", &api.ExecResult{}, 1, "without an exit status"},
		{"nil", nil, 1, "without an exit status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := exitStatus(tt.res)
			if got != tt.wantCode {
				t.Errorf("code = %d, want %d", got, tt.wantCode)
			}
			if tt.wantMsg == "" && msg != "" || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("msg = %q, want %q", msg, tt.wantMsg)
			}
		})
	}
}

func TestSignalNumber(t *testing.T) {
	tests := []struct {
		name string
		want int
	}{
		{"SIGHUP", 1}, {"SIGINT", 2}, {"KILL", 9}, {"sigsegv", 11}, {"SIGPIPE", 13},
		{"SIGTERM", 15}, {"SIGSYS", 31}, {"15", 15}, {"0", 0}, {"200", 0}, {"SIGNOPE", 0}, {"", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := signalNumber(tt.name); got != tt.want {
				t.Errorf("signalNumber(%q) = %d, want %d", tt.name, got, tt.want)
			}
		})
	}
}

func TestStdinFields(t *testing.T) {
	tests := []struct {
		name     string
		data     []byte
		text, b6 string
	}{
		{"text", []byte("héllo\n"), "héllo\n", ""},
		{"empty", nil, "", ""},
		{"binary", []byte{0, 0xff}, "", "AP8="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, b6 := stdinFields(tt.data)
			if text != tt.text || b6 != tt.b6 {
				t.Errorf("stdinFields = %q, %q; want %q, %q", text, b6, tt.text, tt.b6)
			}
		})
	}
}
