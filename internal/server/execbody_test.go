package server

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// TestJSONString checks that the streaming decoder gives exactly what
// encoding/json gives, escapes, surrogates and invalid UTF-8 included,
// wherever its chunks are cut.
func TestJSONString(t *testing.T) {
	pieces := []string{"a", "hello ", "é", "😀", "\xff", "\xe2\x82", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`,
		`\ud800`, `\udc00x`, `\u0000`, "\t"[:0] + " ", "\xc3", "\xe2\x82\xac", `\b\f\r\t`}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		var raw strings.Builder
		n := rng.IntN(3 * jsonStringChunk / 4)
		if i < 3 {
			n = i
		}
		for raw.Len() < n {
			raw.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := `"` + raw.String() + `"` + "rest"
		var want string
		if err := json.Unmarshal([]byte(text[:len(text)-4]), &want); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		var src io.Reader = strings.NewReader(text[1:])
		if i%2 == 1 {
			src = iotest.HalfReader(src) // chunks end wherever reads end
		}
		br := bufio.NewReaderSize(src, 16+rng.IntN(4096))
		got, err := io.ReadAll(newJSONString(br))
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if string(got) != want {
			t.Fatalf("case %d: decoded %d bytes, want %d", i, len(got), len(want))
		}
		if rest, _ := io.ReadAll(br); string(rest) != "rest" {
			t.Fatalf("case %d: left %q after the string", i, rest)
		}
	}
	for _, bad := range []string{"abc", "a\nb\"", `\x"`, `\u12"`} {
		if _, err := io.ReadAll(newJSONString(bufio.NewReader(strings.NewReader(bad)))); !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%q: err %v, want invalid", bad, err)
		}
	}
}

func TestStreamedStdin(t *testing.T) {
	big := strings.Repeat("x", api.MaxStdinBytes+1)
	tests := []struct {
		name      string
		body      string
		argv      string // want
		stdin     string // want, when there is one
		noStdin   bool
		headErr   error // of the members before stdin
		stdinErr  error // of reading the stdin
		errSubstr string
	}{
		{name: "stdin last", body: `{"argv":["cat"],"timeout_seconds":5,"stdin":"a\u00e9\n"}`, argv: "cat", stdin: "aé\n"},
		{name: "base64", body: `{"argv":["cat"], "stdin_base64" : "` + base64.StdEncoding.EncodeToString([]byte{0, 1, 255}) + `" }`, argv: "cat", stdin: "\x00\x01\xff"},
		{name: "base64 with newlines", body: `{"argv":["cat"],"stdin_base64":"YWJj\nZGVm\r\nZw=="}`, argv: "cat", stdin: "abcdefg"},
		{name: "base64 after padding", body: `{"argv":["cat"],"stdin_base64":"YQ==YQ=="}`, argv: "cat", stdinErr: sandbox.ErrInvalid},
		{name: "base64 partial", body: `{"argv":["cat"],"stdin_base64":"YWJ"}`, argv: "cat", stdinErr: sandbox.ErrInvalid},
		{name: "key case", body: `{"argv":["cat"],"Stdin":"x"}`, argv: "cat", stdin: "x"},
		{name: "null", body: `{"argv":["cat"],"stdin":null}`, argv: "cat", stdin: ""},
		{name: "no stdin", body: `{"argv":["cat"],"cwd":"/"}`, argv: "cat", noStdin: true},
		{name: "not last", body: `{"argv":["cat"],"stdin":"x","cwd":"/"}`, argv: "cat", stdinErr: sandbox.ErrInvalid, errSubstr: "last member"},
		{name: "trailing data", body: `{"argv":["cat"],"stdin":"x"}{}`, argv: "cat", stdinErr: sandbox.ErrInvalid},
		{name: "no brace", body: `{"argv":["cat"],"stdin":"xyz" `, argv: "cat", stdinErr: sandbox.ErrInvalid, errSubstr: "ended"},
		{name: "cut", body: `{"argv":["cat"],"stdin":"xyz`, argv: "cat", stdinErr: sandbox.ErrInvalid},
		{name: "bad base64", body: `{"argv":["cat"],"stdin_base64":"!!!!"}`, argv: "cat", stdinErr: sandbox.ErrInvalid, errSubstr: "stdin_base64"},
		{name: "number", body: `{"argv":["cat"],"stdin":5}`, argv: "cat", stdinErr: sandbox.ErrInvalid},
		{name: "too large", body: `{"argv":["cat"],"stdin":"` + big + `"}`, argv: "cat", stdinErr: sandbox.ErrTooLarge},
		{name: "unknown member", body: `{"argv":["cat"],"nope":1,"stdin":"x"}`, headErr: sandbox.ErrInvalid},
		{name: "large members", body: `{"argv":["` + strings.Repeat("a", api.MaxJSONBodyBytes) + `"],"stdin":"x"}`, headErr: sandbox.ErrTooLarge},
		{name: "not an object", body: `["stdin"]`, headErr: sandbox.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/sandboxes/x/exec", strings.NewReader(tt.body))
			r.ContentLength = -1
			req, stdin, err := streamedStdin(httptest.NewRecorder(), r)
			if tt.headErr != nil {
				if !errors.Is(err, tt.headErr) {
					t.Fatalf("err %v, want %v", err, tt.headErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Argv) != 1 || req.Argv[0] != tt.argv {
				t.Fatalf("argv %q", req.Argv)
			}
			if tt.noStdin {
				if stdin != nil {
					t.Fatal("a stdin where the body has none")
				}
				return
			}
			got, err := io.ReadAll(stdin)
			if tt.stdinErr != nil {
				if !errors.Is(err, tt.stdinErr) || !strings.Contains(err.Error(), tt.errSubstr) || !errors.Is(stdin.failed(), tt.stdinErr) {
					t.Fatalf("err %v (failed %v), want %v with %q", err, stdin.failed(), tt.stdinErr, tt.errSubstr)
				}
				return
			}
			if err != nil || string(got) != tt.stdin {
				t.Fatalf("stdin %q, %v; want %q", got, err, tt.stdin)
			}
			if n, err := stdin.Read(make([]byte, 8)); n != 0 || err != io.EOF || stdin.failed() != nil {
				t.Fatalf("read after the end: %d, %v (failed %v)", n, err, stdin.failed())
			}
		})
	}
}

// BenchmarkStreamedStdin decodes a 16 MiB stdin from an exec body, text
// and base64, streamed and (whole-*) the way the daemon did before: the
// whole body decoded, then the request encoded again for the agent.
func BenchmarkStreamedStdin(b *testing.B) {
	whole := strings.Repeat("0123456789abcdef", 1<<20)
	for _, c := range []struct{ name, body string }{
		{"whole-text", `{"argv":["wc","-c"],"stdin":"` + whole + `"}`},
		{"whole-base64", `{"argv":["wc","-c"],"stdin_base64":"` + base64.StdEncoding.EncodeToString([]byte(whole)) + `"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(whole)))
			for b.Loop() {
				var req api.ExecRequest
				if err := decodeFrom(strings.NewReader(c.body), &req); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(&req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	text := strings.Repeat("0123456789abcdef", 1<<20)
	for _, c := range []struct{ name, body string }{
		{"text", `{"argv":["wc","-c"],"stdin":"` + text + `"}`},
		{"base64", `{"argv":["wc","-c"],"stdin_base64":"` + base64.StdEncoding.EncodeToString([]byte(text)) + `"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				r := httptest.NewRequest("POST", "/v1/sandboxes/x/exec", strings.NewReader(c.body))
				_, stdin, err := streamedStdin(httptest.NewRecorder(), r)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, stdin); err != nil || n != int64(len(text)) {
					b.Fatal(n, err)
				}
			}
		})
	}
}
