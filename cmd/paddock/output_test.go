package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
)

var testNow = time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)

func TestShortDurationAndRelTime(t *testing.T) {
	tests := []struct {
		offset time.Duration
		want   string
	}{
		{0, "now"},
		{500 * time.Millisecond, "now"},
		{45 * time.Second, "in 45s"},
		{4*time.Minute + 59*time.Second, "in 4m"},
		{3 * time.Hour, "in 3h"},
		{47 * time.Hour, "in 47h"},
		{72 * time.Hour, "in 3d"},
		{-10 * time.Second, "10s ago"},
		{-2 * time.Hour, "2h ago"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := relTime(testNow.Add(tt.offset), testNow); got != tt.want {
				t.Errorf("relTime(now%+v) = %q, want %q", tt.offset, got, tt.want)
			}
		})
	}
	if got := relTime(time.Time{}, testNow); got != "-" {
		t.Errorf("relTime(zero) = %q, want -", got)
	}
}

func TestExpires(t *testing.T) {
	tests := []struct {
		name string
		sb   api.Sandbox
		want string
	}{
		{"running", api.Sandbox{State: api.StateRunning, ExpiresAt: testNow.Add(4 * time.Minute)}, "in 4m"},
		{"past", api.Sandbox{State: api.StateRunning, ExpiresAt: testNow.Add(-time.Second)}, "expired"},
		{"terminated", api.Sandbox{State: api.StateTerminated, ExpiresAt: testNow.Add(time.Hour)}, "-"},
		{"unknown expiry", api.Sandbox{State: api.StatePaused}, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expires(tt.sb, testNow); got != tt.want {
				t.Errorf("expires = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteSandboxTable(t *testing.T) {
	sandboxes := []api.Sandbox{
		{ID: "sb_a1", Template: "python", State: api.StateRunning, CreatedAt: testNow.Add(-2 * time.Minute),
			ExpiresAt: testNow.Add(4 * time.Minute), Metadata: map[string]string{"team": "ml", "owner": "ci"}},
		{ID: "sb_b22", Template: "base", State: api.StateTerminated, CreatedAt: testNow.Add(-3 * time.Hour),
			ExpiresAt: testNow.Add(-time.Hour)},
		{ID: "sb_c", State: api.StateCreating},
	}
	var buf bytes.Buffer
	if err := writeSandboxTable(&buf, sandboxes, testNow); err != nil {
		t.Fatal(err)
	}
	want := `ID      TEMPLATE  STATE       CREATED  EXPIRES  METADATA
sb_a1   python    running     2m ago   in 4m    owner=ci,team=ml
sb_b22  base      terminated  3h ago   -        -
sb_c    -         creating    -        -        -
`
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	buf.Reset()
	if err := writeSandboxTable(&buf, nil, testNow); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "ID  TEMPLATE  STATE  CREATED  EXPIRES  METADATA\n" {
		t.Errorf("empty table = %q", got)
	}
}

func TestWriteSandbox(t *testing.T) {
	ended := testNow.Add(-time.Minute)
	tests := []struct {
		name string
		sb   api.Sandbox
		want []string
		not  []string
	}{
		{
			name: "running",
			sb: api.Sandbox{ID: "sb_1", Template: "python", State: "running", Runtime: "runc",
				CreatedAt: testNow.Add(-time.Minute), ExpiresAt: testNow.Add(time.Hour),
				Resources: api.Resources{VCPUs: 1.5, MemoryMiB: 512, PIDs: 256}, Metadata: map[string]string{"k": "v"}},
			want: []string{"ID:        sb_1\n", "Runtime:   runc\n", "Resources: 1.5 vCPU, 512 MiB memory, 256 pids\n",
				"(in 1h)\n", "Metadata:  k=v\n"},
			not: []string{"Ended", "Reason"},
		},
		{
			name: "terminated",
			sb:   api.Sandbox{ID: "sb_2", State: "terminated", Reason: "expired", EndedAt: &ended},
			want: []string{"Reason:    expired\n", "(1m ago)\n", "Resources: -\n", "Metadata:  -\n"},
			not:  []string{"Expires", "Runtime"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeSandbox(&buf, tt.sb, testNow); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestWriteProcessTable(t *testing.T) {
	zero, sig := 0, "SIGTERM"
	procs := []api.Process{
		{ID: "p1", PID: 42, Argv: []string{"python3", "-m", "http.server"}, State: api.ProcessRunning, StartedAt: testNow.Add(-30 * time.Second)},
		{ID: "p2", PID: 7, Command: "make test", State: api.ProcessExited, StartedAt: testNow.Add(-5 * time.Minute),
			Result: &api.ExecResult{ExitCode: &zero}},
		{ID: "p3", PID: 8, Argv: []string{"sh", "-c", "echo 'a b'"}, State: api.ProcessExited, Result: &api.ExecResult{Signal: &sig}},
		{ID: "p4", PID: 9, Argv: []string{"sleep", "99"}, State: api.ProcessExited, Result: &api.ExecResult{TimedOut: true, Signal: &sig}},
	}
	var buf bytes.Buffer
	if err := writeProcessTable(&buf, procs, testNow); err != nil {
		t.Fatal(err)
	}
	want := `ID  PID  STATE    STARTED  EXIT     COMMAND
p1  42   running  30s ago  -        python3 -m http.server
p2  7    exited   5m ago   0        make test
p3  8    exited   -        SIGTERM  sh -c 'echo '\''a b'\'''
p4  9    exited   -        timeout  sleep 99
`
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteFileTable(t *testing.T) {
	entries := []api.FileEntry{
		{Path: "/workspace/data", Name: "data", Type: api.FileTypeDir, Size: 4096, Mode: "0755", ModifiedAt: testNow.Add(-time.Hour)},
		{Path: "/workspace/main.py", Name: "main.py", Type: api.FileTypeFile, Size: 120, Mode: "0644", ModifiedAt: testNow.Add(-time.Minute)},
		{Path: "/workspace/link", Name: "link", Type: api.FileTypeSymlink, Size: 7, Mode: "0777", LinkTarget: "main.py"},
		{Path: "/workspace/fifo", Name: "fifo", Type: api.FileTypeOther, Mode: "0600"},
	}
	var buf bytes.Buffer
	if err := writeFileTable(&buf, entries, testNow); err != nil {
		t.Fatal(err)
	}
	want := `MODE   SIZE  MODIFIED  PATH
d0755  -     1h ago    /workspace/data/
-0644  120   1m ago    /workspace/main.py
l0777  7     -         /workspace/link -> main.py
?0600  0     -         /workspace/fifo
`
	if got := buf.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestQuoteArgs(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"ls", "-la"}, "ls -la"},
		{[]string{"echo", "a b", ""}, "echo 'a b' ''"},
		{[]string{"sh", "-c", "it's"}, `sh -c 'it'\''s'`},
		{[]string{"echo", "$HOME"}, "echo '$HOME'"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := quoteArgs(tt.argv); got != tt.want {
				t.Errorf("quoteArgs(%q) = %q, want %q", tt.argv, got, tt.want)
			}
		})
	}
}
