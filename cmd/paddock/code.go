package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/client"
)

// codeCommand is the "paddock code" entry of the command table.
func codeCommand() *command {
	return &command{
		name: "code", args: "[flags] ID",
		summary: "Run code in a sandbox's stateful interpreter",
		detail: `Runs the code read from stdin (or -c CODE) in a code context of sandbox ID:
a long-lived Python, JavaScript or Bash interpreter whose variables, imports
and working directory survive between calls. Output is streamed; the value
of the last expression is printed; figures are saved with --save DIR.
Exits 1 when the cell raised an error, 124 when it timed out.

With -i, a simple REPL: each line is run; a line ending in ':' or '\' or
'{' starts a block that an empty line ends.

  echo 'x = 41' | paddock code sb_123
  paddock code -c 'x + 1' sb_123
  paddock code --lang bash -c 'cd /tmp && pwd' sb_123
  paddock code --save plots sb_123 < chart.py
  paddock code -i sb_123`,
		run: (*cli).cmdCode,
	}
}

// cmdCode implements "paddock code".
func (c *cli) cmdCode(ctx context.Context, args []string) error {
	fs := c.flagSet("code")
	lang := fs.String("lang", "python", "`LANGUAGE`: python, javascript or bash")
	ctxID := fs.String("context", "", "code context `ID` (default: the sandbox's default context of --lang)")
	code := fs.String("c", "", "the `CODE` to run (default: read stdin)")
	timeout := fs.Float64("timeout", 0, "interrupt the cell after `SECONDS` (default "+strconv.Itoa(api.DefaultCodeTimeoutSeconds)+")")
	save := fs.String("save", "", "write image results to `DIR` (figure-N.png, ...)")
	asJSON := fs.Bool("json", false, "print the execution as JSON")
	repl := fs.Bool("i", false, "interactive: run each line (or block) read from stdin")
	pos, err := c.parse(fs, args, 1)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("code", "give exactly one sandbox ID")
	}
	sb := c.client().Sandbox(pos[0])
	req := api.CodeRequest{Language: *lang, ContextID: *ctxID, TimeoutSeconds: *timeout}
	if *ctxID != "" && !flagWasSet(fs, "lang") {
		req.Language = ""
	}
	out := codeOutput{c: c, save: *save}
	if *repl {
		return c.codeREPL(ctx, sb, req, &out)
	}
	if flagWasSet(fs, "c") {
		req.Code = *code
	} else {
		b, err := io.ReadAll(io.LimitReader(c.stdin, api.MaxCodeBytes+1))
		if err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
		req.Code = string(b)
	}
	if *asJSON {
		res, err := sb.RunCode(ctx, &req)
		if err != nil {
			return fmt.Errorf("code in %s: %w", pos[0], err)
		}
		return writeJSON(c.stdout, res)
	}
	res, err := out.run(ctx, sb, req)
	if err != nil {
		return fmt.Errorf("code in %s: %w", pos[0], err)
	}
	switch {
	case res.TimedOut:
		return &exitError{code: 124}
	case res.Error != nil:
		return &exitError{code: 1}
	}
	return nil
}

// codeREPL runs stdin line by line (blocks up to an empty line).
func (c *cli) codeREPL(ctx context.Context, sb *client.Sandbox, req api.CodeRequest, out *codeOutput) error {
	in := bufio.NewScanner(c.stdin)
	in.Buffer(make([]byte, 64<<10), api.MaxCodeBytes)
	var block []string
	fmt.Fprint(c.stderr, ">>> ")
	for in.Scan() {
		line := in.Text()
		if len(block) > 0 || strings.HasSuffix(strings.TrimSpace(line), ":") || strings.HasSuffix(line, "\\") || strings.HasSuffix(strings.TrimSpace(line), "{") {
			if strings.TrimSpace(line) != "" {
				block = append(block, line)
				fmt.Fprint(c.stderr, "... ")
				continue
			}
			line, block = strings.Join(block, "\n"), nil
		}
		if strings.TrimSpace(line) != "" {
			req.Code = line
			if _, err := out.run(ctx, sb, req); err != nil {
				if ctx.Err() != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "paddock: %s\n", oneLine(err.Error()))
			}
		}
		fmt.Fprint(c.stderr, ">>> ")
	}
	fmt.Fprintln(c.stderr)
	return in.Err()
}

// codeOutput prints a cell's events.
type codeOutput struct {
	c      *cli
	save   string
	images int
}

// run streams one cell, printing as it goes, and returns its execution.
func (o *codeOutput) run(ctx context.Context, sb *client.Sandbox, req api.CodeRequest) (*api.CodeExecution, error) {
	for ev, err := range sb.RunCodeStream(ctx, &req) {
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case api.CodeEventStdout:
			io.WriteString(o.c.stdout, ev.Text)
		case api.CodeEventStderr:
			io.WriteString(o.c.stderr, ev.Text)
		case api.CodeEventResult:
			o.result(ev.Result)
		case api.CodeEventError:
			if ev.Error.Traceback != "" {
				io.WriteString(o.c.stderr, strings.TrimRight(ev.Error.Traceback, "\n")+"\n")
			} else {
				fmt.Fprintf(o.c.stderr, "%s: %s\n", ev.Error.Name, ev.Error.Value)
			}
		case api.CodeEventEnd:
			return ev.Execution, nil
		}
	}
	return nil, errors.New("code stream ended without an end event")
}

// result prints a result's text and saves its images.
func (o *codeOutput) result(r *api.CodeResult) {
	if r == nil {
		return
	}
	for _, mime := range []string{"image/png", "image/jpeg", "image/svg+xml"} {
		v, ok := r.Data[mime]
		if !ok {
			continue
		}
		if o.save == "" {
			fmt.Fprintf(o.c.stderr, "[%s, %d bytes; --save DIR writes it]\n", mime, len(v))
			continue
		}
		data := []byte(v)
		if mime != "image/svg+xml" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(v); err != nil {
				fmt.Fprintf(o.c.stderr, "paddock: %s: %v\n", mime, err)
				continue
			}
		}
		o.images++
		name := filepath.Join(o.save, "figure-"+strconv.Itoa(o.images)+"."+map[string]string{"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}[mime])
		if err := os.MkdirAll(o.save, 0o755); err == nil {
			err = os.WriteFile(name, data, 0o644)
			if err == nil {
				fmt.Fprintf(o.c.stderr, "[%s saved to %s]\n", mime, name)
				continue
			}
			fmt.Fprintf(o.c.stderr, "paddock: save %s: %v\n", name, err)
		}
	}
	if t, ok := r.Data["text/plain"]; ok && (r.IsMainResult || len(r.Data) == 1) {
		io.WriteString(o.c.stdout, strings.TrimRight(t, "\n")+"\n")
	}
}
