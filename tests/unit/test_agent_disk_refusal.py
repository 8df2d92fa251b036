"""When the outbox's disk refuses a write (full, I/O error), the agent keeps the events in
memory, in order, and holds the sensor messages' acknowledgements until the events are
on disk (outbox_writer.py). The disk is made full for real: SQLite's
``max_page_count`` stops the outbox file from growing, and SQLite then fails each insert
with SQLITE_FULL, as on a full SD card. The integration test does the same to a running
agent through a file-size limit (tests/integration/test_agent_outage.py)."""
from __future__ import annotations

import json
from pathlib import Path

from agent_harness import ALARM, alarm, config_document, levels

from edgewave.agent.config import settings_from_dict
from edgewave.agent.outbox import Outbox
from edgewave.agent.runtime import Agent
from edgewave.agent.status import StatusReporter, encode_status


def agent_on_disk(tmp_path: Path, **outbox: int) -> Agent:
    """An agent with its outbox, config store and engine (the alarm pattern), no network."""
    bootstrap = tmp_path / "config.trig"
    bootstrap.write_text(config_document(1, patterns={"alarm": ALARM}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), "outbox": outbox,
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent


def status_of(agent: Agent) -> dict:
    """The status document as the started agent's reporter makes it (no network here)."""
    return StatusReporter(agent.settings, agent.counters, pipeline=agent.pipeline, configs=agent.configs,
                          writer=agent.writer).document()


def disk_full(outbox: Outbox, full: bool) -> None:
    """The outbox file may not grow beyond a few more pages than it has (full) or may again."""
    pages = outbox._conn.execute("PRAGMA page_count").fetchone()[0] + 8
    outbox._conn.execute(f"PRAGMA max_page_count={pages if full else 1 << 30}").fetchone()


def stored_levels(outbox: Outbox) -> list[int]:
    return levels([json.loads(row.payload) for row in outbox.pending_after(0, 1000)])


def sensor_message(agent: Agent, n: int, acked: list[int]) -> None:
    agent._on_sensor_message("ew/in/alarm/s1", alarm(n), False, lambda: acked.append(n))


def retry(agent: Agent) -> None:
    with agent._engine_lock:       # as the status thread does
        agent._release_written(agent.writer.retry())


def test_events_wait_in_order_and_acknowledgements_wait_until_the_disk_takes_them(tmp_path):
    agent = agent_on_disk(tmp_path)
    outbox = agent.outbox
    acked: list[int] = []
    sensor_message(agent, 1, acked)
    assert acked == [1] and stored_levels(outbox) == [1]

    disk_full(outbox, True)
    for n in range(2, 30):        # the first few fit in the file's free space, then it is full
        sensor_message(agent, n, acked)
    stored = len(acked)
    # Each message makes one event. Once one event waits, every later one waits behind it,
    # and so does each later message's acknowledgement.
    assert 1 < stored < 29
    assert acked == list(range(1, stored + 1)) and stored_levels(outbox) == acked
    status = status_of(agent)["outbox"]
    assert status["unwritten"] == status["acksHeld"] == 29 - stored and status["unwrittenBytes"] > 0
    assert agent.counters["outbox_write_failed"] == 1

    retry(agent)                  # still full: nothing moves, the failure is counted
    assert status_of(agent)["outbox"]["unwritten"] == 29 - stored
    assert agent.counters["outbox_write_failed"] == 2 and len(acked) == stored

    disk_full(outbox, False)
    sensor_message(agent, 30, acked)   # arrives before the retry: queues behind the waiting ones
    retry(agent)
    assert stored_levels(outbox) == list(range(1, 31))
    assert acked == list(range(1, 31))
    status = status_of(agent)["outbox"]
    assert (status["unwritten"], status["unwrittenBytes"], status["acksHeld"], status["depth"]) == (0, 0, 0, 30)
    sensor_message(agent, 31, acked)   # and the next one is stored and acknowledged at once
    assert stored_levels(outbox)[-1] == 31 and acked[-1] == 31


def test_beyond_the_memory_bound_events_are_dropped_and_counted(tmp_path):
    agent = agent_on_disk(tmp_path, unwritten_max_bytes=3000)   # two alarm events of ~1.2 kB
    acked: list[int] = []
    disk_full(agent.outbox, True)
    for n in range(1, 40):
        sensor_message(agent, n, acked)
    status = status_of(agent)
    kept = status["outbox"]["unwritten"]
    assert 1 <= kept <= 2 and status["outbox"]["unwrittenBytes"] <= 3000
    dropped = agent.counters["outbox_unwritten_dropped"]
    assert dropped > 0 and status["counters"]["dropped"] == dropped
    assert b'"outbox_unwritten_dropped"' in encode_status(status)
    disk_full(agent.outbox, False)
    retry(agent)
    assert acked == list(range(1, 40))      # the dropped ones' messages too, in order
    assert len(stored_levels(agent.outbox)) == 39 - dropped
