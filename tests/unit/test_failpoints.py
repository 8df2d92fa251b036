"""Crash-test hooks: off unless set, one format, and the process really dies where told."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

SCRIPT = """
from edgewave.shared import failpoints
countdown = failpoints.Countdown("before_landed_ack")
for batch in range(5):
    failpoints.crash_at("after_sqlite", batch)
    countdown.tick()
    print("passed", batch, flush=True)
"""


def _run(spec: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "EDGEWAVE_FAILPOINT"}
    if spec is not None:
        env["EDGEWAVE_FAILPOINT"] = spec
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)


def test_unset_or_another_point_never_kills():
    for spec in (None, "", "nowhere:1", "after_sqlite", "before_landed_ack:0", "before_landed_ack:x"):
        done = _run(spec)
        assert done.returncode == 0 and done.stdout.count("passed") == 5, (spec, done.stderr)


def test_a_point_with_its_argument_kills_there_with_sigkill():
    done = _run("after_sqlite:3")
    assert done.returncode == -signal.SIGKILL and done.stdout.split("\n")[-2] == "passed 2", done.stdout
    assert "failpoint after_sqlite reached at 3" in done.stderr
    done = _run("before_landed_ack:2")
    assert done.returncode == -signal.SIGKILL and done.stdout.strip().splitlines() == ["passed 0"], done.stdout
