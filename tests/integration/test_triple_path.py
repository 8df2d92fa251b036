"""The path of one triple (docs/ARCHITECTURE.md) is the path the code takes.

The document's numbered steps name the functions a sensor message goes through, from the
agent's network thread to the cloud's landing zone. Here one message goes through real
brokers, a real ``edgewave-agent run`` and a real ``edgewave-cloud ingest``, each process
started under a profiling hook that records every call of a documented function with the
documented functions enclosing it; the steps, read from the document itself, must appear
in the recorded calls in the documented order. A renamed function, a step moved to
another module, or a new step left out of the document fails here. The Spark job (steps in
``cloud/job.py`` and ``cloud/aggregates.py``) is not started: its steps are only checked to
name functions that exist.
"""
from __future__ import annotations

import ast
import json
import re
import sys
import time
from pathlib import Path

import pytest
from agent_harness import ALARM, KEY, AgentProcess, Publisher, alarm, config_document, observation, wait_for
from cloud_harness import CloudProcess, write_config

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = REPO / "docs" / "ARCHITECTURE.md"
SECTION = "## The path of one triple"
NOT_RUN = ("cloud/job.py", "cloud/aggregates.py")     # the Spark job's steps: the last ones

# Runs ``python -m <module> <args>`` (the rest of its command line) with a profiling hook in
# every thread: each call of a watched function is written to EDGEWAVE_PATH_TRACE as one JSON
# line, [wall-clock ns, thread, the watched functions on the stack, outermost first]. The
# enclosing ones matter: a loop entered before the message (the network thread's) is a step too.
TRACER = r"""
import json, os, runpy, sys, threading, time
root = os.environ["EDGEWAVE_PATH_ROOT"] + os.sep
watched = set(os.environ["EDGEWAVE_PATH_WATCH"].split(","))
out = open(os.environ["EDGEWAVE_PATH_TRACE"], "a", buffering=1)
lock = threading.Lock()
names = {}

def name_of(code):
    name = names.get(code)
    if name is None:
        path = code.co_filename
        name = path[len(root):] + ":" + code.co_qualname if path.startswith(root) else ""
        name = names[code] = name if name in watched else ""
    return name

def record(frame, event, arg):
    if event != "call":
        return
    name = name_of(frame.f_code)
    if not name:
        return
    stack = [name]
    outer = frame.f_back
    while outer is not None:
        enclosing = name_of(outer.f_code)
        if enclosing:
            stack.append(enclosing)
        outer = outer.f_back
    line = json.dumps([time.time_ns(), threading.current_thread().name, stack[::-1]])
    with lock:
        out.write(line + "\n")

at = sys.argv.index("-m")
module = sys.argv[at + 1]
sys.argv = [module, *sys.argv[at + 2:]]
threading.setprofile(record)
sys.setprofile(record)
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def documented_steps() -> list[tuple[int, list[str]]]:
    """Each numbered step of the section: its number and its calls as ``file:qualname``.

    A step opens with a code span of calls joined by `` -> ``; a name without a file is in
    the file of the call before it."""
    section = DOCUMENT.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    steps = []
    for number, chain in re.findall(r"^(\d+)\. `([^`]+)`", section, flags=re.MULTILINE):
        calls, path = [], None
        for ref in chain.split(" -> "):
            if ":" in ref:
                path, ref = ref.split(":", 1)
            assert path is not None, f"step {number}: {chain!r} names no file first"
            calls.append(f"{path}:{ref}")
        steps.append((int(number), calls))
    assert [n for n, _ in steps] == list(range(1, len(steps) + 1)), "the steps are numbered 1, 2, 3, ..."
    return steps


def defined(path: str, qualname: str) -> bool:
    """Whether ``path`` defines a function (or method) of that qualified name."""
    def walk(nodes: list[ast.stmt], prefix: str) -> bool:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                if name == qualname and not isinstance(node, ast.ClassDef):
                    return True
                if qualname.startswith(name + ".") and walk(node.body, name + "."):
                    return True
        return False
    return walk(ast.parse((REPO / path).read_text()).body, "")


def test_every_documented_step_names_a_function_that_exists():
    steps = documented_steps()
    assert len(steps) >= 13
    missing = [f"step {n}: {call}" for n, calls in steps for call in calls if not defined(*call.split(":", 1))]
    assert not missing, f"{DOCUMENT.name} names functions that do not exist: {missing}"
    files = [call.split(":", 1)[0] for _, calls in steps for call in calls]
    first_spark = next(i for i, path in enumerate(files) if path in NOT_RUN)
    assert all(path in NOT_RUN for path in files[first_spark:]), "only the last steps may be the Spark job's"


def in_order(calls: list[str], recorded: list[tuple[int, str, list[str]]]) -> list[str]:
    """The documented ``calls`` not found in the recorded ones in that order (empty: all
    were): each call is looked for after the one before it, among the functions called and
    those enclosing them, outermost first."""
    flat = [name for _, _, stack in sorted(recorded) for name in stack]
    at = 0
    for i, call in enumerate(calls):
        try:
            at = flat.index(call, at) + 1
        except ValueError:
            return calls[i:]
    return []


def read_trace(path: Path, since_ns: int) -> list[tuple[int, str, list[str]]]:
    if not path.exists():
        return []
    return [(t, thread, stack) for t, thread, stack in map(json.loads, path.read_text().splitlines())
            if t >= since_ns]


def test_one_sensor_message_takes_the_documented_path(tmp_path, monkeypatch, mqtt_broker, mqtt_broker2):
    steps = [(n, calls) for n, calls in documented_steps() if calls[0].split(":", 1)[0] not in NOT_RUN]
    calls = [call for _, calls in steps for call in calls]
    agent_trace, ingest_trace = tmp_path / "agent-calls.jsonl", tmp_path / "ingest-calls.jsonl"
    monkeypatch.setenv("EDGEWAVE_PATH_ROOT", str(REPO))
    monkeypatch.setenv("EDGEWAVE_PATH_WATCH", ",".join(calls))
    monkeypatch.setenv("EDGEWAVE_PATH_TRACE", str(agent_trace))
    traced = [sys.executable, "-c", TRACER]

    cloud_dir = tmp_path / "cloud"
    cloud_dir.mkdir()
    config = write_config(cloud_dir, mqtt_broker2, gateways={"gw1": {"key": KEY}})
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log",
                          env={"EDGEWAVE_PATH_TRACE": str(ingest_trace)}, prefix=traced)
    bootstrap = tmp_path / "gateway-config.trig"
    bootstrap.write_text(config_document(1, patterns={"alarm": ALARM}))
    # The status only at connect: nothing but the message reaches ingest afterwards.
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2,
                         {"config": {"bootstrap": str(bootstrap)}, "status": {"interval_s": 3600}},
                         command_prefix=traced)
    sensor = None
    try:
        wait_for(lambda: "ingest connected" in ingest.log() or not ingest.running, 60, "ingest connected")
        assert ingest.running, ingest.log()
        agent.start()
        wait_for(lambda: "link=cloud event=subscribed" in agent.log(), 60, "the agent subscribed on the cloud broker")
        sensor = Publisher(mqtt_broker, "path-sensor")
        time.sleep(1.0)                                   # start-up's own calls are over
        sent_ns = time.time_ns()
        # A match (the alarm) and an observation no match carries (the significance filter's).
        sensor.publish("ew/in/alarm/s1", alarm(1) + observation("obs1", "s1", "temperature", 21))
        landing = cloud_dir / "landing"
        wait_for(lambda: any(landing.rglob("*.jsonl")), 60, "the event in a closed landing file")
        deadline = time.monotonic() + 30                 # the trace lines of the last calls
        while True:
            recorded = read_trace(agent_trace, sent_ns) + read_trace(ingest_trace, sent_ns)
            missing = in_order(calls, recorded)
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        step_of = {call: n for n, step_calls in steps for call in step_calls}
        assert not missing, (
            f"{DOCUMENT.name}, step {step_of[missing[0]]}: {missing[0]} was not called after the step before it; "
            f"called since the message: {sorted({name for _, _, stack in recorded for name in stack})}")
    finally:
        if sensor is not None:
            sensor.close()
        agent.stop()
        ingest.stop()
