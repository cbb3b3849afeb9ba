package main

import (
	"os"
	"testing"
)

func TestParseCpArg(t *testing.T) {
	tests := []struct {
		in, goos string
		want     cpArg
	}{
		{"sb_1:/workspace/a.txt", "linux", cpArg{id: "sb_1", path: "/workspace/a.txt"}},
		{"sb_1:rel/a.txt", "linux", cpArg{id: "sb_1", path: "rel/a.txt"}},
		{"sb_1:", "linux", cpArg{id: "sb_1", path: "/workspace/"}},
		{"sb_1:a:b", "linux", cpArg{id: "sb_1", path: "a:b"}},
		{"local.txt", "linux", cpArg{path: "local.txt"}},
		{"-", "linux", cpArg{path: "-"}},
		{"./a:b", "linux", cpArg{path: "./a:b"}},
		{"/tmp/a:b", "linux", cpArg{path: "/tmp/a:b"}},
		{":x", "linux", cpArg{path: ":x"}},
		{`C:\Users\me\a.txt`, "windows", cpArg{path: `C:\Users\me\a.txt`}},
		{"C:/a.txt", "windows", cpArg{path: "C:/a.txt"}},
		{"C:/a.txt", "linux", cpArg{id: "C", path: "/a.txt"}},
		{`dir\a:b`, "windows", cpArg{path: `dir\a:b`}},
		{"sb_1:/x", "windows", cpArg{id: "sb_1", path: "/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.goos+" "+tt.in, func(t *testing.T) {
			if got := parseCpArg(tt.in, tt.goos); got != tt.want {
				t.Errorf("parseCpArg(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestIntoDir(t *testing.T) {
	tests := []struct {
		dir, name string
		isDir     bool
		want      string
	}{
		{"/workspace/", "a.txt", false, "/workspace/a.txt"},
		{"/workspace", "a.txt", true, "/workspace/a.txt"},
		{"/workspace/b.txt", "a.txt", false, "/workspace/b.txt"},
		{"sub/", "a.txt", false, "sub/a.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := intoDir(tt.dir, tt.name, tt.isDir); got != tt.want {
				t.Errorf("intoDir(%q, %q, %v) = %q, want %q", tt.dir, tt.name, tt.isDir, got, tt.want)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in     string
		want   os.FileMode
		wantOK bool
	}{
		{"0644", 0o644, true},
		{"755", 0o755, true},
		{"4755", 0o755, true},
		{"", 0, false},
		{"rw-", 0, false},
		{"0999", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseMode(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseMode(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
