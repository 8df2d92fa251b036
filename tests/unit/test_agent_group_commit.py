"""Group commit (agent/outbox_writer.py): a message's significant observations wait with the
group's journal rows for a shared commit, and their message's acknowledgement with them; a
match never waits and takes the group along, older rows first; event payloads are stored
packed and read back as they were (agent/outbox.py)."""
from __future__ import annotations

import json
from pathlib import Path

from agent_harness import ALARM, alarm, config_document, observation

from edgewave.agent.config import settings_from_dict
from edgewave.agent.outbox import PACKED_V1, PayloadPacker
from edgewave.agent.runtime import Agent


def open_agent(tmp_path: Path, **outbox: object) -> Agent:
    bootstrap = tmp_path / "config.trig"
    bootstrap.write_text(config_document(1, patterns={"alarm": ALARM}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), "outbox": outbox,
                                      "significance": {"max_rate_per_s": 100},
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent


def kinds(agent: Agent) -> list[str]:
    return [json.loads(row.payload)["kind"] for row in agent.outbox.pending_after(0, 1000)]


def test_significant_events_wait_for_the_group_and_a_match_takes_them_first(tmp_path):
    agent = open_agent(tmp_path)
    acked: list[int] = []
    for n in range(3):     # on the alarm stream: journaled, and each one significant (a new value)
        agent._on_sensor_message(f"ew/in/alarm/t{n}", observation(f"t{n}", f"t{n}", "temperature", 20 + n), False,
                                 lambda n=n: acked.append(n))
    assert agent.counters["significant"] == 3
    assert kinds(agent) == [] and acked == []                      # waiting, unacknowledged
    agent._on_sensor_message("ew/in/alarm/s1", alarm(1), False, lambda: acked.append(99))
    assert kinds(agent) == ["significant"] * 3 + ["match"]         # in order, in one commit
    assert acked == [0, 1, 2, 99]


def test_the_engine_thread_commits_a_waiting_group_when_it_is_due(tmp_path):
    agent = open_agent(tmp_path, group_commit_s=0.2)
    acked: list[int] = []
    agent._on_sensor_message("ew/in/alarm/t1", observation("t1", "t1", "temperature", 20), False,
                             lambda: acked.append(1))
    agent._idle()
    assert kinds(agent) == [] and acked == []
    agent.writer._group_since -= 0.2
    agent._idle()
    assert kinds(agent) == ["significant"] and acked == [1]


def test_no_wait_commits_each_message(tmp_path):
    agent = open_agent(tmp_path, group_commit_s=0)
    acked: list[int] = []
    agent._on_sensor_message("ew/in/alarm/t1", observation("t1", "t1", "temperature", 20), False,
                             lambda: acked.append(1))
    assert kinds(agent) == ["significant"] and acked == [1]


def test_payloads_are_stored_packed_and_read_back_as_they_were(tmp_path):
    agent = open_agent(tmp_path)
    agent._on_sensor_message("ew/in/alarm/s1", alarm(1), False, None)
    stored = agent.outbox.run(lambda conn: conn.execute("SELECT payload, size FROM events").fetchall())
    (payload, size), = stored
    row, = agent.outbox.pending_after(0, 10)
    assert payload[:1] == PACKED_V1 and len(payload) < len(row.payload) // 2 and size == len(row.payload)
    packer = PayloadPacker()
    assert packer.unpack(b'{"plain": "json"}') == b'{"plain": "json"}'      # files from before
    assert packer.unpack(packer.pack(b"\x01 starts like a packed one")) == b"\x01 starts like a packed one"


def test_a_report_stored_while_a_group_waits_frees_its_acknowledgements_without_a_next_message(tmp_path):
    """An event the engine thread stores between messages (an instance report, an absence) takes
    the waiting group into its commit: the group's acknowledgements then go with the engine
    thread's next idle turn, not with a next sensor message that a quiet gateway may never get
    (until then the broker would deliver the message again after a crash)."""
    agent = open_agent(tmp_path, group_commit_s=5)
    acked: list[int] = []
    agent._on_sensor_message("ew/in/alarm/t1", observation("t1", "t1", "temperature", 20), False,
                             lambda: acked.append(1))
    assert kinds(agent) == [] and acked == [] and agent.writer.grouped == 1
    report = {"id": "urn:edgewave:event:report-1", "kind": "instance"}
    agent._to_uplink(agent.writer.write([report], None))      # as _idle stores what the clock closed
    assert kinds(agent) == ["significant", "instance"] and agent.writer.grouped == 0
    agent._idle()
    assert acked == [1]
