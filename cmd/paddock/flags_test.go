package main

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		cmdAt   int
		wantPos []string
		wantStr string // value of --s
		wantB   bool   // value of --b
		wantErr string // substring; "help" for flag.ErrHelp
	}{
		{name: "flags before", args: []string{"--s", "x", "-b", "id"}, cmdAt: -1, wantPos: []string{"id"}, wantStr: "x", wantB: true},
		{name: "flags after", args: []string{"id", "--s=y", "--b"}, cmdAt: -1, wantPos: []string{"id"}, wantStr: "y", wantB: true},
		{name: "single dash", args: []string{"-s", "z", "a", "b"}, cmdAt: -1, wantPos: []string{"a", "b"}, wantStr: "z"},
		{name: "bool with value", args: []string{"--b=false", "a"}, cmdAt: -1, wantPos: []string{"a"}},
		{name: "dash dash", args: []string{"--b", "--", "--s", "x"}, cmdAt: -1, wantPos: []string{"--s", "x"}, wantB: true},
		{name: "stdin dash is positional", args: []string{"-", "id:f"}, cmdAt: -1, wantPos: []string{"-", "id:f"}},
		{name: "run command verbatim", args: []string{"--s", "t", "ls", "-la", "--b"}, cmdAt: 0, wantPos: []string{"ls", "-la", "--b"}, wantStr: "t"},
		{name: "run with dash dash", args: []string{"--b", "--", "python3", "-c", "print(1)"}, cmdAt: 0, wantPos: []string{"python3", "-c", "print(1)"}, wantB: true},
		{name: "run one string", args: []string{"echo hi there"}, cmdAt: 0, wantPos: []string{"echo hi there"}},
		{name: "exec id then command", args: []string{"sb1", "--b", "ls", "-l"}, cmdAt: 1, wantPos: []string{"sb1", "ls", "-l"}, wantB: true},
		{name: "exec flags after id and dash dash", args: []string{"sb1", "--s", "v", "--", "--weird"}, cmdAt: 1, wantPos: []string{"sb1", "--weird"}, wantStr: "v"},
		{name: "exec dash dash before id", args: []string{"--", "sb1", "ls"}, cmdAt: 1, wantPos: []string{"sb1", "ls"}},
		{name: "flag value looks like a flag", args: []string{"--s", "--b"}, cmdAt: -1, wantStr: "--b"},
		{name: "empty", args: nil, cmdAt: 0},
		{name: "help", args: []string{"id", "-h"}, cmdAt: -1, wantErr: "help"},
		{name: "long help", args: []string{"--help"}, cmdAt: 0, wantErr: "help"},
		{name: "help after command is the command's", args: []string{"ls", "-h"}, cmdAt: 0, wantPos: []string{"ls", "-h"}},
		{name: "unknown flag", args: []string{"--nope"}, cmdAt: -1, wantErr: "unknown flag --nope"},
		{name: "triple dash", args: []string{"---s", "x"}, cmdAt: -1, wantErr: "unknown flag"},
		{name: "missing value", args: []string{"id", "--s"}, cmdAt: -1, wantErr: "--s needs a value"},
		{name: "bad int", args: []string{"--n", "ten"}, cmdAt: -1, wantErr: `invalid value "ten" for --n`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			s := fs.String("s", "", "")
			b := fs.Bool("b", false, "")
			fs.Int("n", 0, "")
			pos, err := parseArgs(fs, tt.args, tt.cmdAt)
			switch {
			case tt.wantErr == "help":
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want flag.ErrHelp", err)
				}
				return
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if len(pos) != 0 || len(tt.wantPos) != 0 {
				if !reflect.DeepEqual(pos, tt.wantPos) {
					t.Errorf("positional = %q, want %q", pos, tt.wantPos)
				}
			}
			if *s != tt.wantStr || *b != tt.wantB {
				t.Errorf("--s=%q --b=%v, want %q %v", *s, *b, tt.wantStr, tt.wantB)
			}
		})
	}
}

func TestKVList(t *testing.T) {
	env := map[string]string{"HOME": "/home/me"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		items   []string
		lookup  func(string) (string, bool)
		want    map[string]string
		wantErr bool
	}{
		{name: "empty is nil", want: nil},
		{name: "pairs", items: []string{"A=1", "B=x=y", "C="}, want: map[string]string{"A": "1", "B": "x=y", "C": ""}},
		{name: "later wins", items: []string{"A=1", "A=2"}, want: map[string]string{"A": "2"}},
		{name: "from environment", items: []string{"HOME"}, lookup: lookup, want: map[string]string{"HOME": "/home/me"}},
		{name: "unset in environment", items: []string{"NOPE"}, lookup: lookup, wantErr: true},
		{name: "no lookup", items: []string{"HOME"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l kvList
			for _, it := range tt.items {
				if err := l.Set(it); err != nil {
					t.Fatal(err)
				}
			}
			got, err := l.toMap(tt.lookup)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	var l kvList
	for _, bad := range []string{"", "=v"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

func TestParseSeconds(t *testing.T) {
	tests := []struct {
		in      string
		want    float64
		wantErr bool
	}{
		{"30", 30, false},
		{"1.5", 1.5, false},
		{"0", 0, false},
		{"5m", 300, false},
		{"1h30m", 5400, false},
		{"250ms", 0.25, false},
		{"-1", 0, true},
		{"-5m", 0, true},
		{"soon", 0, true},
		{"NaN", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSeconds(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseSeconds(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
	if got := seconds(1.2).whole(); got != 2 {
		t.Errorf("seconds(1.2).whole() = %d, want 2", got)
	}
}

func TestFormatKV(t *testing.T) {
	if got := formatKV(map[string]string{"b": "2", "a": "1"}, ","); got != "a=1,b=2" {
		t.Errorf("formatKV = %q", got)
	}
	if got := formatKV(nil, ","); got != "" {
		t.Errorf("formatKV(nil) = %q", got)
	}
}
