package integration

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
	"github.com/paddock-sandbox/paddock/internal/fakemodel"
	"github.com/paddock-sandbox/paddock/tooluse"
)

// The C program of the sieve-c script; its first version lacks a
// semicolon, so gcc fails and the scripted model has to fix it.
const sieveC = `#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const long n = 10000000;
    char *composite = calloc(n, 1);
    long count = 0;
    for (long i = 2; i < n; i++) {
        if (composite[i]) continue;
        count++;
        for (long j = i * i; j < n; j += i) composite[j] = 1;
    }
    printf("%ld primes below %ld\n", count, n);
    free(composite);
    return 0;
}
`

func sieveCommand(src string) string {
	return "cat > sieve.c <<'EOF'\n" + src + "EOF\ngcc -O2 -Wall -o sieve sieve.c && ./sieve"
}

// exampleScript answers an example's task: it checks the prompt, makes
// the calls in order (each after the previous one's result passed check)
// and answers with the last call's stdout.
func exampleScript(topic string, calls []fakemodel.Call, checks []func(fakemodel.Result, tooluse.ExecOutput) bool, answer string) fakemodel.Script {
	return func(st fakemodel.State) fakemodel.Turn {
		if !strings.Contains(st.Prompt, topic) {
			return fakemodel.Turn{Text: "UNEXPECTED prompt: " + st.Prompt}
		}
		if st.Turn > 0 {
			res := st.Results[0]
			out, err := res.Exec()
			if len(st.Results) != 1 || err != nil || !checks[st.Turn-1](res, out) {
				return fakemodel.Turn{Text: "UNEXPECTED result: " + res.Content}
			}
			if st.Turn == len(calls) {
				return fakemodel.Turn{Text: answer + " " + strings.TrimSpace(out.Stdout)}
			}
		}
		return fakemodel.Turn{Calls: calls[st.Turn : st.Turn+1]}
	}
}

func succeeded(r fakemodel.Result, out tooluse.ExecOutput) bool {
	return !r.IsError && out.ExitCode != nil && *out.ExitCode == 0
}

func TestExampleGo(t *testing.T) {
	requireDaemon(t)
	cases := []struct {
		name   string
		script fakemodel.Script
		want   string
	}{
		{"primes-anthropic", exampleScript("1000th prime",
			[]fakemodel.Call{{Name: tooluse.RunPython, Input: map[string]string{"code": "primes = []\nn = 1\n" +
				"while len(primes) < 1000:\n    n += 1\n    if all(n % p for p in primes if p * p <= n):\n        primes.append(n)\nprint(primes[-1])\n"}}},
			[]func(fakemodel.Result, tooluse.ExecOutput) bool{succeeded}, "The 1000th prime is"), "The 1000th prime is 7919"},
		{"sieve-c", exampleScript("sieve of Eratosthenes",
			[]fakemodel.Call{
				{Name: tooluse.RunCommand, Input: map[string]string{"command": sieveCommand(strings.Replace(sieveC, "count++;", "count++", 1))}},
				{Name: tooluse.RunCommand, Input: map[string]string{"command": sieveCommand(sieveC)}},
			},
			[]func(fakemodel.Result, tooluse.ExecOutput) bool{
				func(r fakemodel.Result, out tooluse.ExecOutput) bool {
					return r.IsError && out.ExitCode != nil && *out.ExitCode != 0 && strings.Contains(out.Stderr, "sieve.c:10:16: error: expected")
				},
				succeeded,
			}, "The program printed:"), "The program printed: 664579 primes below 10000000"},
		{"fibonacci-openai-responses", exampleScript("40th Fibonacci",
			[]fakemodel.Call{{Name: tooluse.RunPython, Input: map[string]string{"code": "a, b = 0, 1\nfor _ in range(40):\n    a, b = b, a + b\nprint(a)\n"}}},
			[]func(fakemodel.Result, tooluse.ExecOutput) bool{succeeded}, "F(40) ="), "F(40) = 102334155"},
	}
	bin := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exe := filepath.Join(bin, tc.name)
			build := exec.Command("go", "build", "-o", exe, "./examples/go/"+tc.name)
			build.Dir = ".."
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			fake := fakemodel.New(tc.script)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			before := liveSandboxIDs(t)

			cmd := exec.CommandContext(ctxT(t), exe)
			cmd.Env = append(exampleEnv(),
				client.EnvURL+"="+shared.url, client.EnvAPIKey+"="+shared.keys[0],
				"ANTHROPIC_API_KEY=test", "ANTHROPIC_BASE_URL="+srv.URL,
				"OPENAI_API_KEY=test", "OPENAI_BASE_URL="+srv.URL+"/v1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\nstderr:\n%s", tc.name, err, stderr.String())
			}
			if got := strings.TrimSpace(stdout.String()); got != tc.want {
				t.Fatalf("stdout %q, want %q\nstderr:\n%s", got, tc.want, stderr.String())
			}
			for i, r := range fake.Requests() {
				if r.Status != 200 {
					t.Errorf("model request %d answered %d: %s", i, r.Status, r.Error)
				}
			}
			after := liveSandboxIDs(t)
			for id := range after {
				if !before[id] {
					t.Errorf("sandbox %s left running", id)
				}
			}
		})
	}
}

// exampleEnv is the test's environment without model or Paddock settings.
func exampleEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "PADDOCK_") {
			env = append(env, kv)
		}
	}
	return env
}

// liveSandboxIDs returns the ids of key 0's sandboxes not terminated.
func liveSandboxIDs(t *testing.T) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for sb, err := range shared.client(0).All(ctxT(t), client.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if sb.State != api.StateTerminated {
			ids[sb.ID] = true
		}
	}
	return ids
}
