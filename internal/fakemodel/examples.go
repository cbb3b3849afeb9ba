package fakemodel

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/tooluse"
)

// Examples is the scripted model of the example programs in
// examples/python and examples/typescript, which the SDK test suites run
// against the fakemodel binary. It picks a conversation by the API and the
// tool offered:
//
//   - Anthropic with run_python: the 1000th prime. Turn 0 sends a buggy
//     program (NameError) and a check (prints 3) as two parallel calls; turn
//     1 expects the failure back with is_error and the traceback, and the
//     check's 3, and sends the fix; turn 2 answers "The 1000th prime number
//     is N." with N what the sandbox printed.
//
//   - Anthropic with run_command: a C sieve counting the primes below the
//     first number of the prompt (default 1000000). Turn 0 compiles a
//     program missing a semicolon; turn 1 expects gcc's error with is_error
//     and sends the fix; turn 2 answers "The sieve finds C primes below N;
//     the largest is L."
//
//   - OpenAI (Responses or Chat) with run_python: the 40th Fibonacci
//     number. Turn 0 sends a SyntaxError; turn 1 expects it back and sends
//     the fix; turn 2 answers "The 40th Fibonacci number is N."
//
//   - Any API with run_code: a chart (chartTurn). Turn 0 plots squares
//     with run_code; turn 1 expects the figure back as a PNG image block
//     (a note on Chat) and answers "The chart is a WxH PNG; the sum is 45."
//
// A turn whose results are not what the script expects is answered with a
// 400 whose message starts with "fakemodel:", so a test sees at once which
// step of the example went wrong.
//
// Tools offered under an MCP client's names ("mcp__paddock__run_python",
// as Claude Code and so the Claude Agent SDK's query() name them) play the
// same conversations, with the calls sent under those names.
func Examples() Script {
	return func(st State) Turn {
		st, back := unprefixMCP(st)
		return back(examplesTurn(st))
	}
}

func examplesTurn(st State) Turn {
	switch {
	case slices.Contains(st.Tools, tooluse.RunCode):
		return chartTurn(st)
	case st.API == Anthropic && slices.Contains(st.Tools, tooluse.RunCommand):
		return sieveTurn(st)
	case st.API == Anthropic && slices.Contains(st.Tools, tooluse.RunPython):
		return primesTurn(st)
	case st.API != Anthropic && slices.Contains(st.Tools, tooluse.RunPython):
		return fibonacciTurn(st)
	}
	return refuse("no example conversation offers these tools %q (tools are not carried over by previous_response_id)", st.Tools)
}

const primesBuggy = `def primes(n):
    found = []
    candidate = 2
    while len(found) < n:
        if all(candidate % p for p in found if p * p <= candidate):
            found.append(candidate)
        candidate += 1
    return found

print(prime(1000)[-1])
`

var primesFixed = strings.Replace(primesBuggy, "print(prime(1000)[-1])", "print(primes(1000)[-1])", 1)

const fibBuggy = `def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

print(fib(40)
`

var fibFixed = strings.Replace(fibBuggy, "print(fib(40)\n", "print(fib(40))\n", 1)

const sieveC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    const int n = LIMIT;
    char *composite = calloc(n, 1);
    int count = 0, largest = 0;
    if (!composite) return 1;
    for (long i = 2; i < n; i++) {
        if (composite[i]) continue;
        count++;
        largest = (int)i;
        for (long j = i * i; j < n; j += i) composite[j] = 1;
    }
    printf("%d primes below %d, the largest is %d\n", count, n, largest)BUG
    free(composite);
    return 0;
}
`

var (
	promptNumber = regexp.MustCompile(`\d[\d,]*\d`)
	gccMissing   = regexp.MustCompile(`error: expected ['‘];['’]`)
	sieveOutput  = regexp.MustCompile(`(\d+) primes below (\d+), the largest is (\d+)`)
)

func sieveCommand(limit int, fixed bool) string {
	bug := ""
	if fixed {
		bug = ";"
	}
	src := strings.NewReplacer("LIMIT", strconv.Itoa(limit), "BUG", bug).Replace(sieveC)
	return "cat > sieve.c <<'EOF'\n" + src + "EOF\ngcc -O2 -Wall -o sieve sieve.c && ./sieve"
}

// sieveLimit is the first number of the prompt ("below 10,000,000").
func sieveLimit(prompt string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(promptNumber.FindString(prompt), ",", ""))
	if err != nil || n < 10 || n > 100_000_000 {
		return 1_000_000
	}
	return n
}

func primesTurn(st State) Turn {
	call := func(code string) Call { return Call{Name: tooluse.RunPython, Input: map[string]string{"code": code}} }
	switch st.Turn {
	case 0:
		return Turn{Text: "I'll compute it with a quick program.",
			Calls: []Call{call(primesBuggy), call("import sys\nprint(sys.version_info[0])\n")}}
	case 1:
		buggy, check, err := twoResults(st)
		switch {
		case err != nil:
			return *err
		case !buggy.IsError:
			return refuse("the failing program's tool_result must have is_error: true")
		case buggy.out.ExitCode == nil || *buggy.out.ExitCode != 1:
			return refuse("the failing program must exit with 1")
		case !strings.Contains(buggy.out.Stderr, "NameError: name 'prime' is not defined"):
			return refuse("the traceback must reach the model")
		case check.IsError || strings.TrimSpace(check.out.Stdout) != "3":
			return refuse("the check must succeed and print 3")
		}
		return Turn{Text: "Typo: prime → primes. Fixed.", Calls: []Call{call(primesFixed)}}
	case 2:
		r, err := succeededResult(st)
		if err != nil {
			return *err
		}
		return Turn{Text: fmt.Sprintf("The 1000th prime number is %s.", strings.TrimSpace(r.Stdout))}
	}
	return refuse("the conversation went on past its end")
}

func sieveTurn(st State) Turn {
	limit := sieveLimit(st.Prompt)
	call := func(fixed bool) Call {
		return Call{Name: tooluse.RunCommand, Input: map[string]string{"command": sieveCommand(limit, fixed)}}
	}
	switch st.Turn {
	case 0:
		return Turn{Calls: []Call{call(false)}}
	case 1:
		r, err := oneResult(st)
		switch {
		case err != nil:
			return *err
		case !r.IsError:
			return refuse("the failed compile's tool_result must have is_error: true")
		case r.out.ExitCode != nil && *r.out.ExitCode == 0 || !gccMissing.MatchString(r.out.Stderr):
			return refuse("gcc's error must reach the model")
		}
		return Turn{Text: "A missing semicolon; fixing it.", Calls: []Call{call(true)}}
	case 2:
		out, err := succeededResult(st)
		if err != nil {
			return *err
		}
		m := sieveOutput.FindStringSubmatch(out.Stdout)
		if m == nil {
			return refuse("the sieve must print its result")
		}
		return Turn{Text: fmt.Sprintf("The sieve finds %s primes below %s; the largest is %s.", m[1], m[2], m[3])}
	}
	return refuse("the conversation went on past its end")
}

func fibonacciTurn(st State) Turn {
	call := func(code string) Call { return Call{Name: tooluse.RunPython, Input: map[string]string{"code": code}} }
	switch st.Turn {
	case 0:
		return Turn{Calls: []Call{call(fibBuggy)}}
	case 1:
		r, err := oneResult(st)
		switch {
		case err != nil:
			return *err
		case r.out.ExitCode != nil && *r.out.ExitCode == 0 || !strings.Contains(r.out.Stderr, "SyntaxError"):
			return refuse("the SyntaxError must reach the model")
		}
		return Turn{Calls: []Call{call(fibFixed)}}
	case 2:
		out, err := succeededResult(st)
		if err != nil {
			return *err
		}
		return Turn{Text: fmt.Sprintf("The 40th Fibonacci number is %s.", strings.TrimSpace(out.Stdout))}
	}
	return refuse("the conversation went on past its end")
}

// execResult is a tool result with its run decoded.
type execResult struct {
	Result
	out tooluse.ExecOutput
}

func decodeResults(st State) ([]execResult, *Turn) {
	var out []execResult
	for _, r := range st.Results {
		e, err := r.Exec()
		if err != nil {
			t := refuse("a tool result is not the JSON of a run: %.200s", r.Content)
			return nil, &t
		}
		out = append(out, execResult{r, e})
	}
	return out, nil
}

func oneResult(st State) (execResult, *Turn) {
	rs, err := decodeResults(st)
	if err == nil && len(rs) != 1 {
		t := refuse("expected 1 tool result, got %d", len(rs))
		err = &t
	}
	if err != nil {
		return execResult{}, err
	}
	return rs[0], nil
}

func twoResults(st State) (execResult, execResult, *Turn) {
	rs, err := decodeResults(st)
	if err == nil && len(rs) != 2 {
		t := refuse("expected 2 tool results, got %d", len(rs))
		err = &t
	}
	if err != nil {
		return execResult{}, execResult{}, err
	}
	return rs[0], rs[1], nil
}

// succeededResult is the one result of the fixed program, which must
// have succeeded.
func succeededResult(st State) (tooluse.ExecOutput, *Turn) {
	r, err := oneResult(st)
	if err == nil && (r.IsError || r.out.ExitCode == nil || *r.out.ExitCode != 0) {
		t := refuse("the fixed program must succeed, got %.300s", r.Content)
		err = &t
	}
	return r.out, err
}

// refuse answers a request the script did not expect with a 400.
func refuse(format string, args ...any) Turn {
	return Turn{Error: &Error{Status: http.StatusBadRequest, Type: "invalid_request_error",
		Message: "fakemodel: " + fmt.Sprintf(format, args...)}}
}
