"""Outbox: durable, ordered, bounded by bytes and age, counted drops, corrupt files moved aside."""
from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from edgewave.agent.outbox import PAGE_SIZE, Outbox
from edgewave.agent.outbox_checkpoint import AUTOCHECKPOINT_PAGES, CHECKPOINT_COMMITS, Checkpointer


def make(path, **kw):
    kw.setdefault("max_bytes", 10_000)
    kw.setdefault("max_age_s", 3600)
    return Outbox(path, **kw)


def put(box: Outbox, event_id: str, kind: str, payload: bytes, now_ms: int | None = None) -> int | None:
    """One event in a transaction of its own; its seq, or None if the policy refused it."""
    return box.append_batch([(event_id, kind, payload)], None, now_ms=now_ms)[0]


def test_events_survive_reopen_in_order(tmp_path):
    box = make(tmp_path / "o.db")
    seqs = [put(box, f"id{i}", "match", f"payload-{i}".encode(), now_ms=1000 + i) for i in range(5)]
    box.delete([seqs[1]])
    box.close()
    again = make(tmp_path / "o.db")
    rows = again.pending_after(0, 100)
    assert [r.event_id for r in rows] == ["id0", "id2", "id3", "id4"]
    assert rows[0].payload == b"payload-0"
    stats = again.stats(now_ms=2000)
    assert stats.depth == 4 and stats.bytes == sum(len(r.payload) for r in rows)
    assert stats.oldest_age_ms == 1000


def test_pending_after_pages_and_delete_is_idempotent(tmp_path):
    box = make(tmp_path / "o.db")
    seqs = [put(box, f"id{i}", "match", b"x", now_ms=1) for i in range(10)]
    first = box.pending_after(0, 3)
    assert [r.seq for r in first] == seqs[:3]
    assert [r.seq for r in box.pending_after(first[-1].seq, 100)] == seqs[3:]
    assert box.delete(seqs[:3]) == 3
    assert box.delete(seqs[:3]) == 0
    assert box.stats().depth == 7


def test_drop_oldest_when_full_counts_drops(tmp_path, caplog):
    box = make(tmp_path / "o.db", max_bytes=100, policy="drop_oldest")
    with caplog.at_level(logging.ERROR, logger="edgewave.agent.outbox"):
        for i in range(15):
            assert put(box, f"id{i}", "match", b"0123456789", now_ms=i) is not None
    assert [r.event_id for r in box.pending_after(0, 100)] == [f"id{i}" for i in range(5, 15)]
    stats = box.stats()
    assert stats.bytes == 100 and stats.dropped == 5 and stats.dropped_full == 5
    assert any("dropped_oldest" in r.getMessage() for r in caplog.records)
    box.close()
    assert make(tmp_path / "o.db", max_bytes=100).stats().dropped == 5   # survives a restart


def test_refuse_newest_when_full(tmp_path):
    box = make(tmp_path / "o.db", max_bytes=30, policy="refuse_newest")
    results = [put(box, f"id{i}", "match", b"0123456789", now_ms=i) for i in range(5)]
    assert results[3] is None and results[4] is None
    assert [r.event_id for r in box.pending_after(0, 100)] == ["id0", "id1", "id2"]
    assert box.stats().refused == 2


def test_events_older_than_max_age_are_dropped_and_counted(tmp_path):
    box = make(tmp_path / "o.db", max_age_s=10)
    put(box, "old", "match", b"a", now_ms=1_000)
    put(box, "new", "match", b"b", now_ms=8_000)
    put(box, "newest", "match", b"c", now_ms=12_000)
    assert [r.event_id for r in box.pending_after(0, 10)] == ["new", "newest"]
    assert box.stats(now_ms=12_000).dropped_expired == 1


def test_corrupt_file_is_moved_aside_and_recreated(tmp_path, caplog):
    path = tmp_path / "o.db"
    box = make(path)
    put(box, "id0", "match", b"x" * 100)
    box.close()
    data = bytearray(path.read_bytes())
    data[0:100] = b"garbage!" * 12 + b"junk"
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="edgewave.agent.outbox"):
        fresh = make(path)
    assert fresh.moved_aside is not None and fresh.moved_aside.exists()
    assert fresh.moved_aside.name.startswith("o.db.corrupt-")
    assert fresh.stats().depth == 0
    assert put(fresh, "id1", "match", b"y") is not None
    assert any("CORRUPT_FILE_MOVED_ASIDE" in r.getMessage() for r in caplog.records)
    sqlite3.connect(str(path)).execute("SELECT count(*) FROM events").fetchone()


def test_sequence_numbers_are_never_reused_after_the_outbox_empties(tmp_path):
    box = make(tmp_path / "o.db")
    first = put(box, "a", "match", b"x")
    box.delete([first])
    second = put(box, "b", "match", b"y")
    assert second > first
    box.close()
    again = make(tmp_path / "o.db")
    again.delete([second])
    assert put(again, "c", "match", b"z") > second


def test_expiry_also_runs_without_new_events(tmp_path):
    box = make(tmp_path / "o.db", max_age_s=10)
    put(box, "old", "match", b"a", now_ms=1_000)
    box.expire(now_ms=20_000)
    assert box.stats(now_ms=20_000).depth == 0 and box.stats().dropped_expired == 1


def test_a_batch_with_a_gap_deletes_only_the_acknowledged_rows(tmp_path):
    box = make(tmp_path / "o.db")
    seqs = [put(box, f"id{i}", "match", b"x" * (i + 1), now_ms=1) for i in range(6)]
    # consecutive PUBACKs: one range delete
    assert box.delete(seqs[0:2]) == 2
    # not consecutive (seqs[3] is still unacknowledged): seqs[3] must stay
    assert box.delete([seqs[2], seqs[4], seqs[5]]) == 3
    assert [r.event_id for r in box.pending_after(0, 100)] == ["id3"]
    assert box.stats().depth == 1 and box.stats().bytes == 4


def test_checkpoint_copies_the_wal_and_keeps_it_from_growing(tmp_path):
    path = tmp_path / "o.db"
    box = make(path, max_bytes=100_000_000)
    wal = tmp_path / "o.db-wal"

    def write_and_ack(n: int, start: int) -> None:
        for i in range(start, start + n):
            seq = put(box, f"id{i}", "match", b"p" * 600, now_ms=1)
            box.delete([seq])

    write_and_ack(300, 0)
    frames, copied = box.checkpoint()
    assert frames > 0 and copied == frames       # nothing held it back
    size_after_first = wal.stat().st_size
    write_and_ack(300, 300)                       # the writer starts the WAL over once it is copied
    frames2, copied2 = box.checkpoint()
    assert copied2 == frames2
    assert wal.stat().st_size <= size_after_first * 1.1
    seq = put(box, "last", "match", b"z", now_ms=2)
    box.close()
    again = make(path)
    assert [r.seq for r in again.pending_after(0, 10)] == [seq]


@pytest.mark.serial      # its thread runs only on idle CPU: other tests' load starves it
def test_the_checkpoint_thread_keeps_the_wal_below_sqlites_own_threshold(tmp_path):
    """SQLite's automatic checkpoint would run in a writer's commit (fsyncs on the agent's
    network thread): the outbox's own thread must keep the WAL from ever reaching it, even
    against a writer that never pauses."""
    path = tmp_path / "o.db"
    box = make(path, max_bytes=100_000_000)
    box.start_checkpoints()
    noise = os.urandom(300 * 64)             # payloads that do not pack: as many pages as events take
    for i in range(20_000):                  # two to three pages a commit: about 50,000 pages
        seq = put(box, f"id{i}", "match", noise[(i % 64) * 300:(i % 64 + 1) * 300], now_ms=1)
        if i % 20 == 19:
            box.delete(list(range(seq - 19, seq + 1)))
    wal_pages = (tmp_path / "o.db-wal").stat().st_size // (PAGE_SIZE + 24)   # the WAL never shrinks
    assert box.checkpoints.checkpoints >= 10
    assert box.checkpoints.finished_by_writer >= 1      # the few pages the thread could not catch
    box.close()
    assert wal_pages < AUTOCHECKPOINT_PAGES
    assert [r.event_id for r in make(path).pending_after(0, 10)] == []


@pytest.mark.serial      # its thread runs only on idle CPU: other tests' load starves it
def test_the_checkpoint_thread_runs_only_on_a_core_that_would_idle(tmp_path):
    """At normal priority a checkpoint took a core from the brokers and the agent's network
    thread for milliseconds (outbox_checkpoint.py)."""
    box = make(tmp_path / "o.db")
    box.start_checkpoints()
    thread = box.checkpoints._thread
    assert thread is not None
    deadline = time.monotonic() + 5
    while os.sched_getscheduler(thread.native_id) != os.SCHED_IDLE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == os.SCHED_OTHER     # the thread only, not the writers
    box.close()


@pytest.mark.serial      # its thread runs only on idle CPU: other tests' load starves it
def test_the_checkpoint_thread_outlives_an_unexpected_error(tmp_path, monkeypatch, caplog):
    """Were it to end, SQLite's backstop would copy the whole WAL inside writers' commits."""
    failed: list[int] = []
    copy = Checkpointer._pass

    def fails_once(self: Checkpointer) -> tuple[int, int]:
        if not failed:
            failed.append(1)
            raise RuntimeError("a bug")
        return copy(self)

    monkeypatch.setattr(Checkpointer, "_pass", fails_once)
    box = make(tmp_path / "o.db", max_bytes=100_000_000)
    box.start_checkpoints()
    for i in range(3 * CHECKPOINT_COMMITS):
        put(box, f"id{i}", "match", b"p" * 100, now_ms=1)
    deadline = time.monotonic() + 10
    while box.checkpoints.checkpoints < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert failed and box.checkpoints.checkpoints >= 1
    assert any("event=checkpoint_failed" in r.getMessage() for r in caplog.records)
    box.close()


def test_deleted_events_are_not_zeroed_page_by_page(tmp_path):
    """Debian's SQLite zeroes deleted content by default, writing every freed page again."""
    box = make(tmp_path / "o.db")
    assert box.run(lambda conn: conn.execute("PRAGMA secure_delete").fetchone()[0]) == 2    # FAST
    box.close()


def test_a_drop_the_disk_refuses_leaves_the_outbox_and_its_figures_as_they_were(tmp_path):
    """Full outbox, drop_oldest, and the disk refuses the delete: the append fails (the agent
    then keeps the event in memory), and depth and bytes still describe the file. Run in a
    child process, whose file-size limit of 0 bytes makes every file write fail (EFBIG),
    as on a full disk; pytest's own files must not be affected."""
    script = f"""
import resource, sqlite3
from edgewave.agent.outbox import PAGE_SIZE, Outbox
from edgewave.agent.outbox_checkpoint import AUTOCHECKPOINT_PAGES
box = Outbox({str(tmp_path / "o.db")!r}, max_bytes=1000, max_age_s=3600)
for i in range(10):
    box.append_batch([(f"id{{i}}", "match", b"x" * 100)], None)
before = box.stats()
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    box.append_batch([("id10", "match", b"x" * 100)], None)       # needs the oldest dropped first
    print("appended")
except sqlite3.OperationalError as exc:
    print("refused:", exc)
after = box.stats()
rows = box.pending_after(0, 100)
print(before.depth, before.bytes, after.depth, after.bytes, len(rows), sum(len(r.payload) for r in rows))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    refused, figures = done.stdout.splitlines()
    assert refused == "refused: disk I/O error"
    assert figures.split() == ["10", "1000"] * 3


def test_outbox_rows_age_by_real_time_while_stream_time_is_shifted(tmp_path, monkeypatch):
    """shared/clock.py: an outbox row's age (max_age_s, the status's oldest age) is real time;
    stream time (agent_clock.py), which tests shift to step the clock, does not move it."""
    from edgewave.agent.agent_clock import CLOCK
    from edgewave.shared import clock

    monkeypatch.setattr(CLOCK, "wall_offset_ms", -3_600_000)
    box = make(tmp_path / "o.db")
    before = clock.now_ms()
    put(box, "id1", "match", b"p")
    after = clock.now_ms()
    (row,) = box.pending_after(0, 10)
    assert before <= row.created_ms <= after
    assert abs(CLOCK.wall_ms() - (row.created_ms - 3_600_000)) < 60_000     # stream time is an hour behind
    assert 0 <= box.stats().oldest_age_ms < 60_000
    box.close()


def file_seqs(path) -> list[int]:
    """The rows in the file, as another process sees them."""
    conn = sqlite3.connect(str(path))
    try:
        return [seq for (seq,) in conn.execute("SELECT seq FROM events ORDER BY seq")]
    finally:
        conn.close()


def test_landed_rows_leave_at_once_and_the_file_with_the_next_write(tmp_path, monkeypatch):
    path = tmp_path / "o.db"
    box = make(path)
    seqs = [put(box, f"id{i}", "match", b"0123456789", now_ms=1000 + i) for i in range(5)]
    box.delete_soon([(seqs[0], seqs[1]), (seqs[3], seqs[3])])
    stats = box.stats(now_ms=2000)
    assert stats.depth == 2 and stats.bytes == 20 and stats.oldest_age_ms == 998
    assert [r.seq for r in box.pending_after(seqs[1], 10)] == [seqs[2], seqs[4]]
    assert [r.seq for r in box.get(seqs)] == [seqs[2], seqs[4]]
    assert not box.holds_between(seqs[0], seqs[1]) and box.holds_between(seqs[0], seqs[2])
    assert file_seqs(path) == [seqs[2], seqs[4]]           # a read that would see them deleted them
    box.delete_soon([(seqs[4], seqs[4])])
    assert box.stats().depth == 1 and file_seqs(path) == [seqs[2], seqs[4]]
    new = put(box, "id5", "match", b"x", now_ms=2000)       # the next write takes it along
    assert file_seqs(path) == [seqs[2], new] and box.stats().depth == 2
    box.delete_soon([(new, new), (new, new)])              # on PUBACK and landed: counted once
    box.delete_soon([(new, new)])                          # landed twice: counted once
    assert box.stats().depth == 1 and box.stats().bytes == 10 and file_seqs(path) == [seqs[2]]

    new = put(box, "id6", "match", b"x", now_ms=2000)
    box.delete_soon([(new, new)])
    box.delete_due()
    assert file_seqs(path) == [seqs[2], new]               # not yet: a write may come
    monkeypatch.setattr(box, "_landed_since", time.monotonic() - 11)
    box.delete_due()                                       # a quiet gateway
    assert file_seqs(path) == [seqs[2]]
    box.delete_soon([(seqs[2], seqs[2])])
    box.close()                                            # a stop deletes them
    assert file_seqs(path) == [] and make(path).stats().depth == 0


def test_many_landed_rows_are_deleted_at_once(tmp_path):
    path = tmp_path / "o.db"
    box = make(path, max_bytes=1_000_000)
    seqs = [put(box, f"id{i}", "match", b"x") for i in range(40)]
    box.delete_soon([(seqs[0], seqs[9])])
    assert len(file_seqs(path)) == 40
    box.delete_soon([(seqs[10], seqs[39])])                 # past DELETE_SOON_ROWS: no message's commit carries it
    assert file_seqs(path) == [] and box.stats().depth == 0


def test_landed_rows_are_not_counted_as_expired(tmp_path):
    path = tmp_path / "o.db"
    box = make(path, max_age_s=10)
    seqs = [put(box, f"id{i}", "match", b"x", now_ms=1_000) for i in range(3)]
    box.delete_soon([(seqs[0], seqs[1])])
    box.expire(now_ms=20_000)
    stats = box.stats()
    assert stats.depth == 0 and stats.dropped_expired == 1 and file_seqs(path) == []
