"""Run examples/python/*.py against a real paddockd and the fake model API.

The fake (bin/paddock-fakemodel, see _fakemodel.py) validates every request
like the real API and scripts a model that sends buggy code, reads the
failure, sends the fix and answers with what the sandbox printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest

from _support import EXAMPLES_DIR, SRC_DIR, Daemon

from _fakemodel import API_KEY, FakeModel

DAEMON: Daemon = None  # type: ignore[assignment]


def setUpModule() -> None:
    global DAEMON
    DAEMON = Daemon(key_names=("examples",)).start()


def tearDownModule() -> None:
    if DAEMON is not None:
        DAEMON.stop()


class ExamplesTest(unittest.TestCase):
    def run_example(self, name: str, fake: FakeModel) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        for k in list(env):
            if k.startswith(("ANTHROPIC_", "OPENAI_")):
                del env[k]
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(p for p in (SRC_DIR, env.get("PYTHONPATH")) if p),
                "PADDOCK_URL": DAEMON.url,
                "PADDOCK_API_KEY": DAEMON.keys[0],
                "ANTHROPIC_BASE_URL": fake.anthropic_url,
                "ANTHROPIC_API_KEY": API_KEY,
                "OPENAI_BASE_URL": fake.openai_url,
                "OPENAI_API_KEY": API_KEY,
            }
        )
        proc = subprocess.run(
            [sys.executable, os.path.join(EXAMPLES_DIR, name)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=300,
        )
        out = proc.stdout.decode()
        err = proc.stderr.decode()
        self.assertEqual(proc.returncode, 0, f"{name} failed:\nstdout:\n{out}\nstderr:\n{err}")
        self.assertEqual(fake.errors(), [], f"the fake model refused requests of {name}:\n{err}")
        self.assertEqual(len(fake.requests()), 3, "buggy code, fix, answer")
        # The example's sandbox is gone.
        example = name[: -len(".py")]
        left = list(DAEMON.client().list(metadata={"example": example}))
        self.assertEqual(left, [], "the example's sandbox should be deleted")
        done = list(DAEMON.client().list(metadata={"example": example}, state="all"))
        self.assertTrue(done, "the example should have created a sandbox")
        return proc

    def with_fake(self) -> FakeModel:
        fake = FakeModel().start()
        self.addCleanup(fake.stop)
        return fake

    def test_primes_anthropic(self) -> None:
        fake = self.with_fake()
        proc = self.run_example("primes_anthropic.py", fake)
        self.assertEqual(proc.stdout.decode().strip(), "The 1000th prime number is 7919.")
        # The failure went back flagged, with the traceback.
        reqs = fake.requests()
        last = reqs[1]["body"]["messages"][-1]["content"][0]
        self.assertEqual(last["type"], "tool_result")
        self.assertTrue(last["is_error"])
        self.assertIn("NameError: name 'prime' is not defined", json.loads(last["content"])["stderr"])
        ok = reqs[2]["body"]["messages"][-1]["content"][0]
        self.assertFalse(ok["is_error"])
        self.assertEqual(json.loads(ok["content"])["exit_code"], 0)

    def test_sieve_c(self) -> None:
        fake = self.with_fake()
        proc = self.run_example("sieve_c.py", fake)
        self.assertEqual(proc.stdout.decode().strip(), "The sieve finds 664579 primes below 10000000; the largest is 9999991.")
        last = fake.requests()[1]["body"]["messages"][-1]["content"][0]
        self.assertTrue(last["is_error"])
        self.assertIn("sieve.c", json.loads(last["content"])["stderr"])
        (sbx,) = DAEMON.client().list(metadata={"example": "sieve_c"}, state="all")
        self.assertEqual((sbx.info.network.mode, sbx.info.on_timeout), ("off", "stop"))

    def test_fibonacci_openai_chat(self) -> None:
        fake = self.with_fake()
        proc = self.run_example("fibonacci_openai_chat.py", fake)
        self.assertEqual(proc.stdout.decode().strip(), "The 40th Fibonacci number is 102334155.")
        msgs = fake.requests()[1]["body"]["messages"]
        self.assertEqual(msgs[-1]["role"], "tool")
        self.assertIn("SyntaxError", json.loads(msgs[-1]["content"])["stderr"])

    def test_fibonacci_openai_responses(self) -> None:
        fake = self.with_fake()
        proc = self.run_example("fibonacci_openai_responses.py", fake)
        self.assertEqual(proc.stdout.decode().strip(), "The 40th Fibonacci number is 102334155.")
        second = fake.requests()[1]["body"]
        self.assertTrue(second["previous_response_id"].startswith("resp_"))
        self.assertEqual(second["input"][0]["type"], "function_call_output")
        self.assertIn("SyntaxError", json.loads(second["input"][0]["output"])["stderr"])
        self.assertTrue(fake.requests()[0]["body"]["tools"][0]["strict"])
        # A fresh sandbox per call, each with the cost cap.
        made = list(DAEMON.client().list(metadata={"example": "fibonacci_openai_responses"}, state="all"))
        self.assertEqual(len(made), 2)
        self.assertEqual({s.info.max_cost_micros for s in made}, {50000})


if __name__ == "__main__":
    unittest.main()
