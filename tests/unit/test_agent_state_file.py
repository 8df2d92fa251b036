"""The state file is written when something in it changed, at most every state_file_interval_s,
at once when asked (a config change, a connect, `edgewave-agent status`), and never for the
clock alone: an idle gateway writes nothing to its card for it."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from agent_harness import ALARM, config_document

from edgewave.agent.runtime import Agent
from edgewave.agent.config import settings_from_dict
from edgewave.agent.status import StatusReporter


def reporter(tmp_path: Path, interval_s: float) -> tuple[Agent, StatusReporter]:
    bootstrap = tmp_path / "config.trig"
    bootstrap.write_text(config_document(1, patterns={"alarm": ALARM}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"),
                                      "status": {"state_file_interval_s": interval_s, "local_interval_s": 0.05},
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent, StatusReporter(agent.settings, agent.counters, pipeline=agent.pipeline, configs=agent.configs,
                                 writer=agent.writer)


def test_written_on_change_at_most_every_interval_and_never_for_the_clock(tmp_path):
    agent, status = reporter(tmp_path, 3600)
    try:
        assert status.save_if_due(status.document())                 # the first one, at once
        time.sleep(0.01)
        assert not status.save_if_due(status.document())             # only the clock moved
        agent.counters.add("messages_in")
        assert not status.save_if_due(status.document())             # changed, but within the interval
        assert status.save_if_due(status.document(), now=True)       # a config change, a connect
        agent.counters.add("messages_in")
        status.request_state_file()                                  # `edgewave-agent status` asks
        assert status.save_if_due(status.document())
        assert json.loads(status.state_path.read_text())["counters"]["messages_in"] == 2
    finally:
        agent.outbox.close()


def test_zero_interval_writes_every_change(tmp_path):
    agent, status = reporter(tmp_path, 0)
    try:
        assert status.save_if_due(status.document())
        assert not status.save_if_due(status.document())
        agent.counters.add("matches")
        assert status.save_if_due(status.document())
    finally:
        agent.outbox.close()


def test_the_status_thread_neither_spins_nor_writes_while_idle_and_disconnected(tmp_path):
    """A pending status message with the cloud away used to make the thread loop without
    waiting, rewriting the state file each time."""
    agent, status = reporter(tmp_path, 0)
    calls = []
    stopping = threading.Event()
    status.request()
    thread = threading.Thread(target=status.run, args=(stopping, lambda: calls.append(1)))
    thread.start()
    try:
        time.sleep(0.5)
        written = status.state_path.stat().st_mtime_ns
        time.sleep(0.3)
        assert status.state_path.stat().st_mtime_ns == written      # nothing changed: not written again
        assert len(calls) <= 0.8 / 0.05 + 2                          # housekeeping every local_interval_s
    finally:
        stopping.set()
        status.request()
        thread.join(5)
        agent.outbox.close()
