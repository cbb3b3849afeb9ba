// Package kernel runs the code contexts of the guest agent: long-lived
// interpreters (Python, JavaScript, Bash) whose globals survive between
// cells, with streamed output and rich results (POST /code).
//
// Each context is one interpreter process started by the agent (through
// Config.Start, so that PID 1's reaper collects it) in its own process
// group, running a small driver embedded in this package (drivers/):
//
//   - Python: a standard-library driver run with `python3 -u -c`. It works
//     in any template that has python3, with no package to install and
//     nothing downloaded at run time (ipykernel is not needed; it is not in
//     most templates). It evaluates the last expression of a cell like a
//     notebook, renders values through the IPython display protocol
//     (_repr_html_, _repr_png_, _repr_mimebundle_, ...), renders pandas
//     objects as HTML and JSON, and captures every open matplotlib figure
//     after the cell (MPLBACKEND=Agg, no show() needed) as PNG and SVG.
//   - JavaScript: Node, with the REPL's top-level await rewrite
//     (--expose-internals, internal/repl/await) and vm.runInThisContext, so
//     top-level declarations stay. TypeScript is not offered: Node 20
//     cannot strip types.
//   - Bash: `bash -c` with a loop that evals each cell in the shell itself,
//     so cd, variables and functions stay.
//
// Protocol: the driver reads requests on fd 3 (a JSON line; for Bash the
// code ended by NUL) and writes events on fd 4 (JSON lines: started, result,
// error, stdout/stderr notes, done; an interrupt waits for started). The cell's own stdout and stderr are fds 1
// and 2, streamed as they come. After a cell the driver writes a random
// per-process marker to fd 1 and fd 2 before "done", so the agent knows it
// has all of the cell's output; the marker never reaches the client.
//
// Everything the driver sends is hostile input: event lines are bounded
// (longer ones are dropped and reported), each MIME representation is
// bounded by api.MaxCodeItemBytes and a cell's results by
// api.MaxCodeResultsBytes (what does not fit is listed in
// CodeResult.Omitted with its size, never dropped silently), kept output by
// api.MaxCodeOutputBytes per stream.
//
// A timeout or an interrupt sends SIGINT to the context's process group;
// a context that has not finished the cell after Config.Grace is killed and
// restarted, and the result says so (restarted). An interpreter that exits
// (exit(), os._exit, a crash) is restarted the same way.
package kernel
