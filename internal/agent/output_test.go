package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"golang.org/x/sys/unix"
)

func TestOutputLogCapAndFollow(t *testing.T) {
	o := newOutputLog(10, api.Event{Type: api.EventStart, PID: 1})
	got := make(chan []api.Event, 1)
	go func() {
		var evs []api.Event
		_ = o.follow(context.Background(), func(ev api.Event) error {
			evs = append(evs, ev)
			return nil
		})
		got <- evs
	}()
	o.write(streamStdout, []byte("abc"))
	o.write(streamStdout, []byte("def")) // coalesced
	o.write(streamStderr, []byte("E"))
	o.write(streamStdout, []byte("ghijkl")) // 4 kept, 2 dropped
	for range 1000 {
		o.write(streamStdout, []byte("dropped"))
	}
	o.finish(api.ExecResult{ExitCode: new(int)}, time.Now())
	o.write(streamStderr, []byte("after finish"))

	res, _ := o.resultCopy(true)
	if res.Stdout != "abcdefghij" || res.Stderr != "E" || res.StdoutBytes != 7012 || res.StderrBytes != 1 ||
		!res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("result %+v", res)
	}
	if n := len(o.chunks); n != 3 {
		t.Errorf("%d chunks, want 3", n)
	}
	evs := <-got
	var types []string
	var out strings.Builder
	for _, ev := range evs {
		types = append(types, ev.Type)
		out.Write(ev.Data)
	}
	if types[0] != api.EventStart || types[len(types)-1] != api.EventExit || out.String() != "abcdefEghij" {
		t.Errorf("followed %v %q", types, out.String())
	}
	// A late follower replays the same.
	var late strings.Builder
	if err := o.follow(context.Background(), func(ev api.Event) error { late.Write(ev.Data); return nil }); err != nil || late.String() != out.String() {
		t.Errorf("late follower: %q %v", late.String(), err)
	}
}

func TestOutputLogChunkBound(t *testing.T) {
	o := newOutputLog(1<<20, api.Event{})
	for i := range maxChunks + 10 {
		o.write(stream(i%2), []byte("x"))
	}
	o.finish(api.ExecResult{}, time.Now())
	res, _ := o.resultCopy(true)
	if len(o.chunks) != maxChunks || !res.StdoutTruncated || res.StdoutBytes != (maxChunks+10)/2 {
		t.Errorf("%d chunks, result %+v", len(o.chunks), res)
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want unix.Signal
		ok   bool
	}{
		{"", unix.SIGKILL, true},
		{"SIGTERM", unix.SIGTERM, true},
		{"TERM", unix.SIGTERM, true},
		{"hup", unix.SIGHUP, true},
		{"15", unix.SIGTERM, true},
		{"0", 0, false},
		{"65", 0, false},
		{"SIGFOO", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSignal(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseSignal(%q) = %v, %v", tt.in, got, err)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	base := []string{"HOME=/root", "PADDOCK_TOKEN=secret", "FOO=old"}
	env, err := commandEnv(base, map[string]string{"FOO": "new", "BAR": "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/root", "BAR=b", "FOO=new", "PATH=" + defaultPath}
	if !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00"}} {
		if _, err := commandEnv(nil, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
