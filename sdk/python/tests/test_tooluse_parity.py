"""paddock.tooluse says what Go's tooluse says: the same tool definitions
(names, descriptions, schemas) for the same options, and the same
formatted results. Runs a small Go program from the repository's module;
skipped without a Go toolchain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from _support import REPO_DIR

import paddock
from paddock import tooluse

PROGRAM = r'''
package main

import (
	"encoding/json"
	"os"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/tooluse"
)

func main() {
	code := 1
	long := strings.Repeat("x", 300) + "END"
	out := map[string]any{
		"default": tooluse.Tools(tooluse.Options{}),
		"custom":  tooluse.Tools(tooluse.Options{Timeout: 30 * time.Second, MaxFileBytes: 500, NetworkNote: "It may reach pypi.org.", Tools: []string{"read_file", "run_command"}}),
		"format":  tooluse.FormatExec(&api.ExecResult{ExitCode: &code, Stdout: long, Stderr: "boom"}, 100),
		"code":    tooluse.Tools(tooluse.Options{Tools: []string{"run_code"}}),
		"format_code": tooluse.FormatCode(&api.CodeExecution{ExecutionCount: 3, Stdout: long, Stderr: "warn",
			Results: []api.CodeResult{
				{Data: map[string]string{"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}},
				{Data: map[string]string{"text/plain": "<Figure>", "image/png": strings.Repeat("A", 2000)}},
				{Data: map[string]string{"text/plain": "45"}, IsMainResult: true, Omitted: map[string]int64{"text/html": 9}},
			},
			Error: &api.CodeError{Name: "ValueError", Value: "bad", Traceback: long}}, 100, 1000),
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
'''


def _go() -> str:
    for p in (shutil.which("go"), "/usr/local/go/bin/go"):
        if p and os.path.exists(p):
            return p
    return ""


class Parity(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        go = _go()
        if not go:
            raise unittest.SkipTest("no Go toolchain to run tooluse")
        d = tempfile.mkdtemp(prefix=".tooluse-parity-", dir=REPO_DIR)
        try:
            with open(os.path.join(d, "main.go"), "w") as f:
                f.write(PROGRAM)
            out = subprocess.run([go, "run", "./" + os.path.basename(d)], cwd=REPO_DIR, capture_output=True, timeout=300)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if out.returncode != 0:
            raise AssertionError(out.stderr.decode())
        cls.go = json.loads(out.stdout)

    @staticmethod
    def py(ts):  # type: ignore[no-untyped-def]
        return [{"Name": t.name, "Description": t.description, "InputSchema": t.input_schema} for t in ts]

    def test_definitions(self) -> None:
        self.assertEqual(self.py(tooluse.tools()), self.go["default"])
        o = tooluse.Options(timeout=30, max_file_bytes=500, network_note="It may reach pypi.org.", tools=["read_file", "run_command"])
        self.assertEqual(self.py(tooluse.tools(o)), self.go["custom"])

    def test_run_code(self) -> None:
        self.assertEqual(self.py(tooluse.tools(tooluse.Options(tools=["run_code"]))), self.go["code"])
        long = "x" * 300 + "END"
        ex = paddock.CodeExecution(execution_count=3, stdout=long, stderr="warn", results=[
            paddock.CodeResult(data={"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="}),
            paddock.CodeResult(data={"text/plain": "<Figure>", "image/png": "A" * 2000}),
            paddock.CodeResult(data={"text/plain": "45"}, is_main_result=True, omitted={"text/html": 9}),
        ], error=paddock.CodeError(name="ValueError", value="bad", traceback=long))
        text, failed, images = tooluse.format_code(ex, 100, 1000)
        g = self.go["format_code"]
        self.assertEqual(json.loads(text), json.loads(g["Text"]))
        self.assertEqual(failed, g["IsError"])
        self.assertEqual([{"MediaType": i.media_type, "Data": i.data} for i in images], g["Images"])

    def test_format(self) -> None:
        r = tooluse.format_exec(paddock.ExecResult(exit_code=1, stdout="x" * 300 + "END", stderr="boom"), 100)
        self.assertEqual(json.loads(r.text), json.loads(self.go["format"]["Text"]))
        self.assertEqual(r.is_error, self.go["format"]["IsError"])


if __name__ == "__main__":
    unittest.main()
