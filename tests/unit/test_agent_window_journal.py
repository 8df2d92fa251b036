"""Durable windows (agent/window_journal.py), in process: an agent's storage opened twice on
the same data directory, the first never closed (as after ``kill -9``). What a sensor message
put into the engine comes back into the next engine, the matches it had already made are not
stored again, and bad state is discarded and counted. The real processes, signals and brokers
are in tests/integration/test_agent_crash.py."""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
import zstandard
from agent_harness import ALARM, FIRE, alarm, config_document, observation

from edgewave.agent import outbox_writer, window_journal
from edgewave.agent.agent_clock import CLOCK
from edgewave.agent.config import settings_from_dict
from edgewave.agent.outbox_writer import Written
from edgewave.agent.runtime import Agent

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


def open_agent(tmp_path: Path, version: int = 1, patterns: dict[str, str] | None = None, **state: object) -> Agent:
    """An agent with its outbox, config store and engine, no network (a process's start-up)."""
    bootstrap = tmp_path / f"config-{version}.trig"
    bootstrap.write_text(config_document(version, patterns=patterns or {"fire": FIRE, "alarm": ALARM}))
    agent = Agent(settings_from_dict({"data_dir": str(tmp_path / "data"), "state": state,
                                      "significance": {"enabled": False},
                                      "config": {"key": "k", "bootstrap": str(bootstrap)}}))
    agent.open_storage()
    return agent


def send(agent: Agent, topic: str, payload: bytes, acked: list | None = None, settle: bool = True) -> None:
    """One sensor message; with ``settle``, then what the engine thread does once a waiting
    group is due (``outbox.group_commit_s`` later): its rows commit and its acknowledgements go."""
    agent._on_sensor_message(topic, payload, False, (lambda: acked.append(payload)) if acked is not None else None)
    if settle:
        with agent._engine_lock:
            agent._release_written(Written([], agent.writer.flush()))


def hot(agent: Agent, n: int = 1, acked: list | None = None) -> None:
    send(agent, "ew/in/fire/t1", observation(f"temp{n}", "t1", "temperature", 70), acked)


def smoke(agent: Agent, n: int = 1, acked: list | None = None) -> None:
    send(agent, "ew/in/fire/s1", observation(f"smoke{n}", "s1", "smoke", 1), acked)


def stored(agent: Agent, pattern: str = "fire") -> list[dict]:
    events = [json.loads(row.payload) for row in agent.outbox.pending_after(0, 10_000)]
    return [e for e in events if e["pattern"] == pattern]


def journal_rows(agent: Agent) -> int:
    return agent.outbox.run(lambda conn: conn.execute("SELECT count(*) FROM journal").fetchone()[0])


def journal_messages(agent: Agent) -> int:
    """The messages the journal holds: a row holds those of one commit."""
    packer = window_journal.Packer(16384)
    rows = agent.outbox.run(lambda conn: conn.execute("SELECT arrival_ms, payload FROM journal").fetchall())
    return sum(len(packer.unpack_block(payload, arrival)) for arrival, payload in rows)


@pytest.fixture
def clock(monkeypatch):
    """The agent's clock, shifted or moved to another boot by a test (the test hook's effect)."""
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 0)
    monkeypatch.setattr(CLOCK, "boot_id", "boot-a")
    return CLOCK


def test_a_window_survives_a_crash_and_its_matches_are_not_stored_twice(tmp_path, clock):
    first = open_agent(tmp_path)
    acked: list = []
    hot(first, 1, acked)
    smoke(first, 1, acked)                     # one fire match, stored with the smoke message's row
    assert len(stored(first)) == 1 and len(acked) == 2
    assert journal_rows(first) == 2

    second = open_agent(tmp_path)              # the first was never closed: a crash
    assert second.counters["state_restored"] == 2
    assert second.counters["state_replayed_matches"] == 1
    assert len(stored(second)) == 1            # the replayed match was not stored again
    smoke(second, 2)                            # joins the restored hot reading
    fires = stored(second)
    assert len(fires) == 2 and fires[1]["windowEnd"] - fires[1]["windowStart"] < 5_000
    assert second.counters["state_discarded"] == 0


def test_a_row_holds_a_commits_messages_and_restores_those_still_in_a_window(tmp_path, clock, monkeypatch):
    first = open_agent(tmp_path)
    send(first, "ew/in/fire/t1", observation("temp1", "t1", "temperature", 70), settle=False)
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 61_000)        # past the fire window's 60 s
    send(first, "ew/in/fire/t1", observation("temp2", "t1", "temperature", 70))   # the group commits
    assert journal_rows(first) == 1 and journal_messages(first) == 2

    second = open_agent(tmp_path)                  # a crash: the expired reading is not replayed
    assert second.counters["state_restored"] == 1 and second.counters["state_discarded"] == 0
    assert journal_rows(second) == 1               # the row stays whole while one of its messages is needed
    third = open_agent(tmp_path)                   # and restores the same again
    assert third.counters["state_restored"] == 1
    smoke(third)
    (fire,) = stored(third)
    assert fire["windowEnd"] - fire["windowStart"] < 5_000     # with temp2, the reading still in the window


def test_a_packed_row_gives_back_its_messages_and_refuses_damage(tmp_path):
    packer = window_journal.Packer(16384)
    entries = [window_journal.JournalEntry(at, at + 7, f"ew/in/s/{at}\0payload {at}".encode(), 9)
               for at in (1_000, 1_000, 5_300, 4_000_000_000, 3_999_999_000)]   # the last earlier: kept as is
    block = packer.pack_block(entries)
    assert (block.arrival_ms, block.boot_ms, block.size, block.messages) == (3_999_999_000, 3_999_999_007, 45, 5)
    assert packer.unpack_block(block.payload, block.arrival_ms) == [(e.arrival_ms, e.message) for e in entries]
    assert [b.messages for b in open_agent(tmp_path).journal.pack(entries * 10)] == [32, 18]   # BLOCK_MESSAGES
    for damaged in (block.payload[:-3], b"\x00" + block.payload, b""):
        with pytest.raises((ValueError, zstandard.ZstdError)):
            packer.unpack_block(damaged, 0)


def test_a_redelivered_message_already_in_the_journal_is_acknowledged_and_skipped(tmp_path, clock):
    first = open_agent(tmp_path)
    for n in range(1, 4):
        send(first, "ew/in/alarm/s1", alarm(n), [])
    second = open_agent(tmp_path)
    acked: list = []
    # The broker redelivers the two whose acknowledgement it never got, then a new one.
    for n in (2, 3, 4):
        send(second, "ew/in/alarm/s1", alarm(n), acked)
    assert acked == [alarm(2), alarm(3), alarm(4)]
    assert second.counters["redelivered_skipped"] == 2
    assert len(stored(second, "alarm")) == 4     # alarm 1-3 once each, and 4
    send(second, "ew/in/alarm/s1", alarm(1), acked)   # after a new message: an ordinary message again
    assert len(stored(second, "alarm")) > 4 and second.counters["redelivered_skipped"] == 2


def test_rows_older_than_the_longest_window_are_pruned(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(window_journal, "PRUNE_WAIT_MS", 1000)   # the timings below assume it
    agent = open_agent(tmp_path, patterns={"alarm": ALARM})      # a 10 s window
    for n in range(1, 6):
        send(agent, "ew/in/alarm/s1", alarm(n))
    assert journal_rows(agent) == 5
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 12_000)
    send(agent, "ew/in/alarm/s1", alarm(6))     # no engine thread ran meanwhile: the late deletion goes with it
    assert journal_rows(agent) == 1
    send(agent, "ew/in/fire/t1", observation("temp", "t1", "temperature", 70))   # no window reads it
    assert journal_rows(agent) == 1


def test_expired_rows_go_with_later_messages_a_few_pages_at_a_time(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(window_journal, "PRUNE_WAIT_MS", 1000)   # the timings below assume it
    agent = open_agent(tmp_path, patterns={"alarm": ALARM})      # a 10 s window
    for n in range(1, 6):
        send(agent, "ew/in/alarm/s1", alarm(n))
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 10_500)
    send(agent, "ew/in/alarm/s1", alarm(6))       # 5 expired: fewer than PRUNE_ROWS, waited 0.5 s
    assert journal_rows(agent) == 6
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 11_200)
    at_ack: list[int] = []
    agent._on_sensor_message("ew/in/alarm/s1", alarm(7), False, lambda: at_ack.append(journal_rows(agent)))
    assert at_ack == [2]                           # the oldest waited PRUNE_WAIT_MS: gone with alarm 7
    assert len(stored(agent, "alarm")) == 7

    many = window_journal.PRUNE_MAX_ROWS + 44      # a burst, then a clock past all of it
    for n in range(8, 8 + many):
        send(agent, "ew/in/alarm/s1", alarm(n))
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 30_000)
    send(agent, "ew/in/alarm/s1", alarm(1000))    # at most PRUNE_MAX_ROWS in one transaction
    assert 2 + many + 1 - window_journal.PRUNE_MAX_ROWS <= journal_rows(agent) < 2 + many
    send(agent, "ew/in/alarm/s1", alarm(1001))    # the rest with the next
    assert journal_rows(agent) == 2
    second = open_agent(tmp_path)                  # what is left still restores
    assert second.counters["state_restored"] == 2 and second.counters["state_discarded"] == 0


def test_expired_rows_are_deleted_while_the_gateway_is_idle(tmp_path, clock, monkeypatch):
    monkeypatch.setattr(window_journal, "PRUNE_WAIT_MS", 1000)   # the timings below assume it
    agent = open_agent(tmp_path, patterns={"alarm": ALARM})
    for n in range(1, 6):
        send(agent, "ew/in/alarm/s1", alarm(n))
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 10_500)
    agent._idle()                                  # the engine thread with no work queued
    assert journal_rows(agent) == 5                # expired, but waited less than PRUNE_WAIT_MS
    monkeypatch.setattr(CLOCK, "wall_offset_ms", 11_200)
    agent._idle()
    assert journal_rows(agent) == 0


def test_the_journal_is_bounded_by_max_bytes(tmp_path, clock, monkeypatch):
    agent = open_agent(tmp_path, patterns={"alarm": ALARM}, max_bytes=2_000)
    for n in range(1, 40):
        monkeypatch.setattr(CLOCK, "wall_offset_ms", n * 200)   # 200 ms apart: one prune a second
        send(agent, "ew/in/alarm/s1", alarm(n))
    size = agent.outbox.run(lambda conn: conn.execute("SELECT sum(length(payload)) FROM journal").fetchone()[0])
    assert size <= 2_000 + 5 * len(alarm(40)) and agent.counters["state_truncated"] > 0


def test_a_config_change_starts_an_empty_journal(tmp_path, clock):
    first = open_agent(tmp_path)
    hot(first)
    cloud_doc = config_document(2, patterns={"fire": FIRE})
    with first._engine_lock:
        first.configs._swap_in(window_journal_compile(first, 2, cloud_doc))
        first.configs.store.record(2, "trig", cloud_doc)
        first.journal.follow(first.configs.applied, first.pipeline.engine)   # as after a config work item
        first.writer.write((), None)
    assert journal_rows(first) == 0
    second = open_agent(tmp_path, version=2)
    assert second.counters["state_restored"] == 0 and second.counters["state_discarded"] == 0


def window_journal_compile(agent: Agent, version: int, text: str):
    from edgewave.agent.reconfigure import compile_document
    return compile_document(version, "trig", text, agent.settings)


def test_durable_windows_off_journals_nothing(tmp_path, clock):
    first = open_agent(tmp_path, durable_windows=False)
    hot(first)
    assert first.outbox.run(lambda c: c.execute("SELECT count(*) FROM sqlite_master WHERE name='journal'")
                            .fetchone()[0]) == 0
    second = open_agent(tmp_path, durable_windows=False)
    smoke(second)
    assert stored(second) == [] and second.counters["state_restored"] == 0


@pytest.mark.parametrize("damage", ["format", "engine", "config_version", "payload", "types", "topic"])
def test_a_foreign_or_undecodable_journal_is_discarded_and_counted(tmp_path, clock, damage, caplog):
    first = open_agent(tmp_path)
    hot(first)
    conn = sqlite3.connect(tmp_path / "data" / "outbox.db")
    if damage == "payload":
        conn.execute("UPDATE journal SET payload = substr(payload, 1, 40)")          # truncated
    elif damage == "types":
        conn.execute("UPDATE journal SET payload = 'text, not bytes', boot_ms = 'x'")
    elif damage == "topic":
        message = b"ew/fire/t1\0" + observation("temp1", "t1", "temperature", 70)
        block = window_journal.Packer(16384).pack_block([window_journal.JournalEntry(1, 1, message, 1)])
        conn.execute("UPDATE journal SET payload = ?", (block.payload,))             # names no stream
    else:
        conn.execute("UPDATE journal_meta SET value = 'other' WHERE name = ?", (damage,))
    conn.commit()
    conn.close()
    second = open_agent(tmp_path)
    assert second.counters["state_discarded"] == 1 and second.counters["state_restored"] == 0
    assert sum("event=state_discarded" in r.getMessage() for r in caplog.records) == 1
    smoke(second)
    assert stored(second) == []                # the discarded window held the hot reading
    hot(second, 2)
    assert len(stored(second)) == 1            # and the agent matches as ever
    third = open_agent(tmp_path)               # the fresh journal is good
    assert third.counters["state_discarded"] == 0 and third.counters["state_restored"] == 2


def test_a_damaged_outbox_file_discards_the_journal_with_it(tmp_path, clock):
    first = open_agent(tmp_path)
    hot(first)
    first.outbox.close()
    path = tmp_path / "data" / "outbox.db"
    data = bytearray(path.read_bytes())
    data[100:4000] = b"\xde\xad" * 1950
    path.write_bytes(bytes(data))
    second = open_agent(tmp_path)
    assert second.counters["state_discarded"] == 1 and second.outbox.moved_aside is not None
    hot(second, 2)
    smoke(second, 2)
    assert len(stored(second)) == 1


# -- the clock while the agent was down (documented in docs/agent.md, Durable windows) -------------

def down_and_back(tmp_path: Path, clock, *, offset_ms: int, boot_id: str, monkeypatch) -> Agent:
    first = open_agent(tmp_path)
    hot(first)
    monkeypatch.setattr(CLOCK, "wall_offset_ms", offset_ms)
    monkeypatch.setattr(CLOCK, "boot_id", boot_id)
    return open_agent(tmp_path)


@pytest.mark.parametrize("offset_ms", [-HOUR_MS, DAY_MS])
def test_same_boot_windows_age_by_the_true_time_down_whatever_the_wall_clock_did(tmp_path, clock, offset_ms,
                                                                                 monkeypatch):
    second = down_and_back(tmp_path, clock, offset_ms=offset_ms, boot_id="boot-a", monkeypatch=monkeypatch)
    assert second.counters["state_restored"] == 1
    before = CLOCK.wall_ms()
    smoke(second)
    (fire,) = stored(second)
    # The restored reading moved with the wall clock, keeping its true age: the match spans
    # the seconds the agent was down, not the step, and never runs backwards.
    assert 0 <= fire["windowEnd"] - fire["windowStart"] < 5_000
    assert fire["windowEnd"] >= before - 1_000
    assert second.pipeline.last_arrival_ms >= fire["windowEnd"]


def test_another_boot_with_the_clock_a_day_ahead_expires_the_windows(tmp_path, clock, monkeypatch):
    second = down_and_back(tmp_path, clock, offset_ms=DAY_MS, boot_id="boot-b", monkeypatch=monkeypatch)
    assert second.counters["state_restored"] == 0 and second.counters["state_discarded"] == 0
    smoke(second)
    assert stored(second) == []


def test_another_boot_with_the_clock_behind_the_journal_discards_the_windows(tmp_path, clock, monkeypatch):
    second = down_and_back(tmp_path, clock, offset_ms=-HOUR_MS, boot_id="boot-b", monkeypatch=monkeypatch)
    assert second.counters["state_discarded"] == 1 and second.counters["state_clock_unknown"] == 1
    smoke(second)
    assert stored(second) == []


def test_the_restored_journal_is_rewritten_onto_the_new_clock(tmp_path, clock, monkeypatch):
    """After a restore on a shifted clock, a second crash finds the rows where the engine has them."""
    second = down_and_back(tmp_path, clock, offset_ms=-HOUR_MS, boot_id="boot-a", monkeypatch=monkeypatch)
    assert second.counters["state_restored"] == 1
    third = open_agent(tmp_path)
    assert third.counters["state_restored"] == 1
    smoke(third)
    (fire,) = stored(third)
    assert 0 <= fire["windowEnd"] - fire["windowStart"] < 5_000


def test_the_journal_format_is_checked(tmp_path, clock, monkeypatch):
    open_agent(tmp_path)
    hot_agent = open_agent(tmp_path)
    hot(hot_agent)
    monkeypatch.setattr(window_journal, "JOURNAL_FORMAT", str(int(window_journal.JOURNAL_FORMAT) + 1))
    again = open_agent(tmp_path)
    assert again.counters["state_discarded"] == 1


def test_a_journal_with_the_previous_layout_is_discarded_and_replaced(tmp_path, clock):
    """An agent upgraded over a journal of format 2 (deflated payloads, a digest column)."""
    first = open_agent(tmp_path)
    hot(first)
    first.outbox.run(lambda conn: conn.executescript(
        "DROP TABLE journal; CREATE TABLE journal (seq INTEGER PRIMARY KEY, arrival_ms INTEGER NOT NULL, "
        "boot_ms INTEGER NOT NULL, stream TEXT NOT NULL, digest BLOB NOT NULL, payload BLOB NOT NULL); "
        "INSERT INTO journal VALUES (1, 1, 1, '<s>', x'00', x'00'); "
        "UPDATE journal_meta SET value = '2' WHERE name = 'format';"))
    upgraded = open_agent(tmp_path)
    assert upgraded.counters["state_discarded"] == 1 and upgraded.counters["state_restored"] == 0
    hot(upgraded, 2)                               # the journal works again, in the new layout
    assert journal_rows(upgraded) == 1
    assert upgraded.counters["outbox_write_failed"] == 0
    after = open_agent(tmp_path)
    assert after.counters["state_restored"] == 1 and after.counters["state_discarded"] == 0


# -- group commit (outbox_writer.py) ---------------------------------------------------------
def test_rows_without_events_share_a_commit_and_their_acks_go_only_after_it(tmp_path, clock, monkeypatch):
    agent = open_agent(tmp_path)
    hot(agent, 99)                                 # committed: the journal's tables exist
    acked: list = []
    for n in range(1, 4):                          # observations that complete nothing: they wait
        send(agent, "ew/in/fire/t1", observation(f"temp{n}", "t1", "temperature", 70), acked, settle=False)
    assert acked == [] and journal_rows(agent) == 1
    assert agent.writer.flush_due().acks == ()    # not yet due
    monkeypatch.setattr(agent.writer, "_group_since", agent.writer._group_since - agent.writer.group_wait_s)
    with agent._engine_lock:                      # the engine thread, idle: the group is due
        agent._release_written(agent.writer.flush_due())
    assert len(acked) == 3 and journal_messages(agent) == 4  # one commit, then the three acks in order
    assert journal_rows(agent) == 2                            # the three messages in one row
    assert [json_level(p) for p in acked] == [1, 2, 3]


def json_level(payload: bytes) -> int:
    return int(payload.split(b"temp")[1].split(b">")[0])


def test_a_match_commits_the_waiting_rows_with_its_event_at_once(tmp_path, clock):
    agent = open_agent(tmp_path)
    send(agent, "ew/in/fire/t2", observation("temp0", "t2", "temperature", 20))   # committed: the tables exist
    acked: list = []
    send(agent, "ew/in/fire/t1", observation("temp1", "t1", "temperature", 70), acked, settle=False)
    send(agent, "ew/in/fire/x", b"not n-triples", acked, settle=False)     # rejected: its ack waits behind
    assert acked == [] and journal_rows(agent) == 1
    send(agent, "ew/in/fire/s1", observation("smoke1", "s1", "smoke", 1), acked, settle=False)
    assert len(acked) == 3 and journal_messages(agent) == 3 and len(stored(agent)) == 1
    assert acked[1] == b"not n-triples"            # in arrival order
    second = open_agent(tmp_path)                  # a crash now: all three rows are back
    assert second.counters["state_restored"] == 3 and second.counters["state_replayed_matches"] == 1


def test_a_group_holds_at_most_group_max_acks_and_a_crash_before_its_commit_loses_nothing(tmp_path, clock):
    agent = open_agent(tmp_path)
    acked: list = []
    limit = outbox_writer.GROUP_MAX
    for n in range(1, 2 * limit + 3):
        send(agent, "ew/in/fire/t1", observation(f"temp{n}", "t1", "temperature", 70), acked, settle=False)
        assert n - len(acked) < limit              # never more held than the broker lets through
    assert len(acked) == 2 * limit and journal_messages(agent) == 2 * limit
    second = open_agent(tmp_path)                  # the two unacknowledged ones are the broker's again
    assert second.counters["state_restored"] == 2 * limit


def _group_of_two_then_one_at_once(agent, acked: list, n: int, monkeypatch) -> None:
    """Two messages wait in a group until it commits by time; the next arrives right after
    its acknowledgements, as from a broker that lets only two through unacknowledged."""
    writer = agent.writer
    for k in (n, n + 1):
        send(agent, "ew/in/fire/t1", observation(f"temp{k}", "t1", "temperature", 70), acked, settle=False)
    monkeypatch.setattr(writer, "_group_since", writer._group_since - writer.group_wait_s)
    with agent._engine_lock:
        agent._release_written(writer.flush_due())
    send(agent, "ew/in/fire/t1", observation(f"temp{n + 2}", "t1", "temperature", 70), acked, settle=False)


def test_groups_are_cut_when_the_broker_waited_for_their_acks(tmp_path, clock, monkeypatch):
    # "right after" is 5 ms on a gateway; on a loaded test machine handling a message can take
    # longer than that, and what is tested here is the counting, not the machine's speed
    monkeypatch.setattr(outbox_writer, "STALL_S", 1.0)
    agent = open_agent(tmp_path)
    writer = agent.writer
    acked: list = []
    for round_ in range(outbox_writer.STALL_CONFIRM):
        assert writer.group_max == outbox_writer.GROUP_MAX     # not cut on fewer stalls in a row
        _group_of_two_then_one_at_once(agent, acked, 3 * round_ + 1, monkeypatch)
        with agent._engine_lock:                   # the third message's group commits too
            agent._release_written(Written([], writer.flush()))
    assert writer.group_max == 2
    sent = len(acked)
    send(agent, "ew/in/fire/t1", observation("temp90", "t1", "temperature", 70), acked, settle=False)
    send(agent, "ew/in/fire/t1", observation("temp91", "t1", "temperature", 70), acked, settle=False)
    assert len(acked) == sent + 2                  # cut at two: no wait for a third
    monkeypatch.setattr(writer, "_cut_until", 0.0)
    with agent._engine_lock:
        agent._release_written(writer.flush_due())
    assert writer.group_max == outbox_writer.GROUP_MAX


def test_one_message_soon_after_a_group_by_chance_cuts_nothing(tmp_path, clock, monkeypatch):
    """At a few messages a second, one now and then arrives just after a group committed by
    time without the broker having held it back: that alone is no limit to cut groups at."""
    monkeypatch.setattr(outbox_writer, "STALL_S", 1.0)     # "right after" on a loaded test machine, as above
    agent = open_agent(tmp_path)
    acked: list = []
    _group_of_two_then_one_at_once(agent, acked, 1, monkeypatch)
    writer = agent.writer
    assert writer._stalls == (2, 1)
    with agent._engine_lock:
        agent._release_written(Written([], writer.flush(by_time=True)))
    time.sleep(outbox_writer.STALL_S * 2)           # the next message comes later: no stall
    send(agent, "ew/in/fire/t1", observation("temp9", "t1", "temperature", 70), acked, settle=False)
    assert writer._stalls == (0, 0)
    with agent._engine_lock:
        agent._release_written(Written([], writer.flush()))
    _group_of_two_then_one_at_once(agent, acked, 10, monkeypatch)
    _group_of_two_then_one_at_once(agent, acked, 20, monkeypatch)     # three held now: another count
    assert writer.group_max == outbox_writer.GROUP_MAX and writer._stalls == (3, 1)


def test_a_config_change_drops_the_waiting_rows_and_releases_their_acks(tmp_path, clock):
    first = open_agent(tmp_path)
    acked: list = []
    send(first, "ew/in/fire/t1", observation("temp1", "t1", "temperature", 70), acked, settle=False)
    cloud_doc = config_document(2, patterns={"fire": FIRE})
    with first._engine_lock:
        first.configs._swap_in(window_journal_compile(first, 2, cloud_doc))
        first.configs.store.record(2, "trig", cloud_doc)
        first.journal.follow(first.configs.applied, first.pipeline.engine)
        first.writer.write((), None)
        assert list(first.writer.release(())) and journal_rows(first) == 0
