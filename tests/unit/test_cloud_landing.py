"""The landing zone: durable append, roll by size/time/date, atomic close, crash recovery."""
from __future__ import annotations

import json
from pathlib import Path

from edgewave.cloud.landing import LandingZone, partition_for, read_records

DAY_MS = 1_795_046_400_000  # 2026-11-19T00:00Z


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def closed(root: Path) -> list[Path]:
    return sorted(root.glob("date=*/*.jsonl"))


def open_files(root: Path) -> list[Path]:
    return sorted(root.glob("date=*/*.jsonl.inprogress"))


def test_records_are_invisible_until_the_file_is_closed(tmp_path):
    lz = LandingZone(tmp_path, roll_bytes=1 << 20, roll_seconds=60, clock=Clock())
    lz.append({"id": "a"}, DAY_MS)
    lz.sync()
    assert closed(tmp_path) == [] and len(open_files(tmp_path)) == 1
    # synced data is on disk in the in-progress file
    assert json.loads(open_files(tmp_path)[0].read_text()) == {"id": "a"}
    lz.close()
    assert open_files(tmp_path) == []
    assert read_records(tmp_path) == [{"id": "a"}]


def test_rolls_by_size(tmp_path):
    lz = LandingZone(tmp_path, roll_bytes=1024, roll_seconds=3600, clock=Clock())
    for i in range(100):
        lz.append({"id": i, "pad": "x" * 40}, DAY_MS)
        lz.roll_if_due()
    lz.close()
    files = closed(tmp_path)
    assert len(files) >= 5
    assert all(f.stat().st_size < 1024 + 100 for f in files)
    assert [r["id"] for r in read_records(tmp_path)] == list(range(100))


def test_rolls_by_time(tmp_path):
    clock = Clock()
    lz = LandingZone(tmp_path, roll_bytes=1 << 20, roll_seconds=5, clock=clock)
    lz.append({"id": 1}, DAY_MS)
    clock.t += 4
    assert not lz.roll_if_due()
    clock.t += 1.5
    assert lz.roll_if_due()
    assert len(closed(tmp_path)) == 1 and open_files(tmp_path) == []
    assert not lz.roll_if_due()  # nothing open, nothing to do


def test_partitioned_by_ingest_date(tmp_path):
    lz = LandingZone(tmp_path, clock=Clock())
    lz.append({"id": 1}, DAY_MS)
    lz.append({"id": 2}, DAY_MS + 86_400_000)
    lz.close()
    assert [f.parent.name for f in closed(tmp_path)] == ["date=2026-11-19", "date=2026-11-20"]
    assert partition_for(DAY_MS) == "date=2026-11-19"


def test_recovery_keeps_synced_records_and_cuts_a_torn_line(tmp_path):
    lz = LandingZone(tmp_path, clock=Clock())
    lz.append({"id": 1}, DAY_MS)
    lz.append({"id": 2}, DAY_MS)
    lz.sync()
    path = open_files(tmp_path)[0]
    with open(path, "ab") as fh:  # a crash in the middle of writing record 3
        fh.write(b'{"id": 3, "tru')
    # a new writer (the restarted ingest) recovers what the crashed one left open
    recovered = LandingZone(tmp_path, clock=Clock()).recover()
    assert recovered == 2
    assert open_files(tmp_path) == []
    assert read_records(tmp_path) == [{"id": 1}, {"id": 2}]


def test_recovery_removes_empty_leftovers(tmp_path):
    lz = LandingZone(tmp_path, clock=Clock())
    lz.append({"id": 1}, DAY_MS)
    path = open_files(tmp_path)[0]  # nothing synced: the crash lost the buffered record (never acked)
    path.write_bytes(b"")
    assert LandingZone(tmp_path).recover() == 0
    assert list(tmp_path.rglob("*.jsonl*")) == []


def test_file_names_do_not_collide_across_writers(tmp_path):
    a = LandingZone(tmp_path, clock=Clock())
    b = LandingZone(tmp_path, clock=Clock())
    a.append({"w": "a"}, DAY_MS)
    b.append({"w": "b"}, DAY_MS)
    a.close()
    b.close()
    assert sorted(r["w"] for r in read_records(tmp_path)) == ["a", "b"]


def test_each_writer_recovers_only_its_own_files(tmp_path):
    live = LandingZone(tmp_path, clock=Clock(), writer="w1")
    live.append({"id": "w1-open"}, DAY_MS)
    live.sync()
    crashed = LandingZone(tmp_path, clock=Clock(), writer="w0")
    crashed.append({"id": "w0-left"}, DAY_MS)
    crashed.sync()
    # a file from before writers had names belongs to the default writer
    legacy = open_files(tmp_path)[0].parent / "part-1763510400000-000001-0123abcd.jsonl.inprogress"
    legacy.write_bytes(b'{"id": "legacy"}\n')
    assert LandingZone(tmp_path, clock=Clock(), writer="w0").recover() == 2
    assert sorted(r["id"] for r in read_records(tmp_path)) == ["legacy", "w0-left"]
    assert [p.name.endswith("-w1.jsonl.inprogress") for p in open_files(tmp_path)] == [True]
    live.close()
    assert sorted(r["id"] for r in read_records(tmp_path)) == ["legacy", "w0-left", "w1-open"]
