"""Per-instance queries in the agent (agent/instance_queries.py), in process: a pushed config's
aggregate runs beside the continuous patterns, each reported window instance is stored in the
outbox as one instance event, an idle gateway reports on time by the clock, and across a crash
(storage opened twice, the first never closed) an instance is neither lost nor stored twice.
The real processes, brokers and signals are in tests/integration/test_agent_instances.py."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from agent_harness import AVERAGE, FIRE, config_document, observation

from edgewave.agent.agent_clock import CLOCK
from edgewave.agent.config import settings_from_dict
from edgewave.agent.outbox_writer import Written
from edgewave.agent.reconfigure import compile_document
from edgewave.agent.runtime import Agent
from edgewave.shared import clock as shared_clock
from edgewave.shared.events import rows_dicts

EX = "http://example.org/"
BASE = 1_800_000_000_000          # a wall-clock time aligned to the 2 s instances


def open_agent(tmp_path: Path, version: int = 1, threshold: int = 50) -> Agent:
    bootstrap = tmp_path / f"config-{version}-{threshold}.trig"
    bootstrap.write_text(config_document(version, patterns={"fire": FIRE, "average": AVERAGE}, threshold=threshold))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), "significance": {"enabled": False},
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent


@pytest.fixture
def clock(monkeypatch):
    """The agent's wall clock, stopped at a time each test sets (``at``): the real time a step
    takes (a config document is read by a child process) must not move a 2 s window. ``boot``
    names the boot it is (a restart on the same boot ages the windows by the boot clock instead)."""
    now = [BASE]
    monkeypatch.setattr(shared_clock, "now_ms", lambda: now[0])
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 0)
    monkeypatch.setattr(CLOCK, "boot_id", "boot-a")

    def at(ms: int, boot: str = "boot-a") -> None:
        now[0] = BASE + ms
        monkeypatch.setattr(CLOCK, "boot_id", boot)
    return at


def reading(agent: Agent, n: int, sensor: str, value: int) -> None:
    agent._on_sensor_message(f"ew/in/fire/{sensor}", observation(f"temp{n}", sensor, "temperature", value), False,
                             lambda: None)
    with agent._engine_lock:
        agent._release_written(Written([], agent.writer.flush()))


def counters(agent: Agent) -> dict[str, int]:
    """The agent's counters and the engine's, as its status document carries them."""
    agent.pipeline.read_engine_counters()
    return {**agent.counters.snapshot(), **agent.pipeline.engine_counters}


def instances(agent: Agent) -> list[dict]:
    events = [json.loads(row.payload) for row in agent.outbox.pending_after(0, 10_000)]
    return [e for e in events if e["kind"] == "instance"]


def averages(event: dict) -> dict[str, tuple[Decimal, int]]:
    return {row["room"]: (Decimal(row["avg"].split('"')[1]), int(row["n"].split('"')[1])) for row in rows_dicts(event)}


def test_each_instance_is_stored_as_one_event_when_a_later_reading_or_the_clock_closes_it(tmp_path, clock):
    clock(100)
    agent = open_agent(tmp_path)
    assert counters(agent)["instance_queries"] == 1
    reading(agent, 1, "t1", 20)
    clock(900)
    reading(agent, 2, "t1", 30)
    clock(1500)
    reading(agent, 3, "t2", 10)
    assert instances(agent) == []                  # the instance [0, 2 s) is still open
    clock(2100)
    reading(agent, 4, "t1", 40)                    # its time closes [0, 2 s)
    first = instances(agent)
    assert len(first) == 1
    assert (first[0]["windowStart"] - BASE, first[0]["windowEnd"] - BASE, first[0]["operator"]) == (0, 2000, "RSTREAM")
    assert averages(first[0]) == {f"<{EX}room1>": (Decimal(25), 2), f"<{EX}room2>": (Decimal(10), 1)}
    clock(4700)
    agent._idle()                                  # no message: the clock closes [2 s, 4 s)
    second = instances(agent)[1:]
    assert len(second) == 1 and second[0]["windowEnd"] - BASE == 4000
    assert averages(second[0]) == {f"<{EX}room1>": (Decimal(40), 1)}
    totals = counters(agent)
    assert totals["instances_reported"] == 2 and totals["instance_events"] == 2


def test_an_instance_open_at_a_crash_is_reported_after_it_and_none_is_stored_twice(tmp_path, clock):
    clock(100)
    first = open_agent(tmp_path)
    reading(first, 1, "t1", 20)
    clock(2100)
    reading(first, 2, "t1", 30)                    # closes [0, 2 s): stored with this message's row
    clock(2500)
    reading(first, 3, "t2", 50)                    # [2 s, 4 s) open when the agent dies
    assert len(instances(first)) == 1

    clock(9000, boot="boot-b")                     # down for 6.5 s (a power cut), longer than the instances
    second = open_agent(tmp_path)
    assert second.counters["state_restored"] == 3
    assert len(instances(second)) == 1             # [0, 2 s) was not stored again
    second._idle()
    reported = instances(second)
    assert [e["windowEnd"] - BASE for e in reported] == [2000, 4000]
    assert averages(reported[1]) == {f"<{EX}room1>": (Decimal(30), 1), f"<{EX}room2>": (Decimal(50), 1)}
    assert counters(second)["state_replayed_instances"] == 1


def test_an_instance_the_clock_closed_before_a_crash_is_not_reported_again(tmp_path, clock):
    clock(100)
    first = open_agent(tmp_path)
    reading(first, 1, "t1", 20)
    clock(2600)
    first._idle()                                  # closed by the clock: no journal row says so
    assert [e["windowEnd"] - BASE for e in instances(first)] == [2000]

    clock(3000, boot="boot-b")
    second = open_agent(tmp_path)
    second._idle()
    assert [e["windowEnd"] - BASE for e in instances(second)] == [2000]
    clock(3100, boot="boot-b")
    reading(second, 2, "t1", 60)
    clock(4600, boot="boot-b")
    second._idle()
    assert [e["windowEnd"] - BASE for e in instances(second)] == [2000, 4000]


def test_a_static_data_change_keeps_the_instance_windows(tmp_path, clock):
    clock(100)
    agent = open_agent(tmp_path)
    reading(agent, 1, "t1", 20)
    evaluator = agent.pipeline.instances.evaluators["average"]
    changed = compile_document(2, "trig", config_document(2, patterns={"fire": FIRE, "average": AVERAGE},
                                                          threshold=70), agent.settings)
    with agent._engine_lock:
        change, _ = agent.pipeline.reconfigure(agent.configs.applied, changed)
    assert set(change.kept) == {"fire", "average"} and change.static_added == 1
    assert agent.pipeline.instances.evaluators["average"] is evaluator     # its windows live on
    clock(2100)
    reading(agent, 2, "t1", 30)
    assert averages(instances(agent)[0]) == {f"<{EX}room1>": (Decimal(20), 1)}
