"""The Spark job stores per-instance query results exactly once (cloud/aggregates.py, ``instance_results``).

Instance events as ingest lands them (``landing_record``), over three micro-batches: a result
in two parts (more than 500 rows), the same instance landed twice (a gateway's re-send after a
crash), once again with an ingest time older than the de-duplication horizon (the job drops it
as late; the table's key would have stored it once anyway), and the job SIGKILLed right after
its SQLite commit of a batch (``after_sqlite``), so that Spark replays that batch on restart.
Every instance's rows are in the table once, as ``{variable: term}`` objects, an unbound
variable absent, each event with its part of the instance.
"""
from __future__ import annotations

import json
import os
import time

import pytest

from cloud_harness import CloudProcess, landing_record, query, write_config
from edgewave.shared.events import instance_events, match_event

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EX = "http://example.org/"
DEC = "http://www.w3.org/2001/XMLSchema#decimal"


def co2(minute: int, rooms: int = 3) -> list[dict]:
    """One minute's instance of co2-per-room: a row per room, the last room without an average."""
    rows = [{"room": f"<{EX}gw1/room{r}>", "average": f'"{400 + 10 * minute + r}.5"^^<{DEC}>'} for r in range(rooms)]
    rows.append({"room": f"<{EX}gw1/room{rooms}>"})
    start = 1_800_000_000_000 + minute * 60_000
    return instance_events("gw1", "co2-per-room", start, start + 60_000, "RSTREAM", rows, start + 60_500)


def line(event: dict, ingest_ms: int) -> str:
    return json.dumps(landing_record(event, ingest_ms), separators=(",", ":"))


def stored(db) -> dict[tuple[int, str], list[dict]]:   # noqa: ANN001
    out: dict[tuple[int, str], list[dict]] = {}
    for start, event_id, rows in query(db, "SELECT window_start, event_id, rows FROM instance_results"):
        assert (start, event_id) not in out
        out[(start, event_id)] = json.loads(rows)
    return out


def test_instance_results_are_stored_once_through_duplicates_a_late_resend_and_a_job_crash(tmp_path):
    now = int(time.time() * 1000)
    two_hours = 2 * 3600 * 1000
    partition = tmp_path / "landing" / "events" / "date=2026-01-01"
    partition.mkdir(parents=True)
    big = instance_events("gw1", "sensors-seen", 1_800_000_000_000, 1_800_000_010_000, "ISTREAM",
                          [{"sensor": f"<{EX}gw1/sensor/s{i}>"} for i in range(700)], 1_800_000_010_100)
    assert len(big) == 2
    fire = match_event("gw1", "fire", {"room": f"<{EX}gw1/room3>"}, now - 5000, now - 4000,
                       [((f"<{EX}o>", f"<{EX}p>", f"<{EX}v>"), now - 4000)], now - 3900)
    files = [
        [line(e, now + i) for i, e in enumerate(co2(0) + co2(1) + big + [fire])],
        [line(e, now + 1000) for e in co2(1) + co2(2)],              # minute 1 again: a re-send
        [line(e, now - two_hours) for e in co2(0)] + [line(e, now + 2000) for e in co2(3)],
    ]
    for order, lines in enumerate(files):
        path = partition / f"part-{order}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (now / 1000 - 100 + order, now / 1000 - 100 + order))

    config = write_config(tmp_path, spark={"max_files_per_trigger": 1, "dedup_horizon": "15 minutes"})
    args = ["spark", "--config", str(config), "--available-now"]
    crashed = CloudProcess(args, tmp_path / "job1.log", env={"EDGEWAVE_FAILPOINT": "after_sqlite:1"})
    assert crashed.wait(timeout=300) == -9, crashed.log()[-3000:]
    job = CloudProcess(args, tmp_path / "job2.log")
    assert job.wait(timeout=300) == 0, job.log()[-3000:]
    assert "applied=no (already committed: replayed batch)" in job.log()
    db = tmp_path / "cloud.db"

    results = stored(db)
    ids = {event_id for _, event_id in results}
    assert ids == {e["id"] for e in co2(0) + co2(1) + co2(2) + co2(3) + big}
    for minute in range(4):
        (event,) = co2(minute)
        assert results[(event["windowStart"], event["id"])] == [
            {"room": f"<{EX}gw1/room{r}>", "average": f'"{400 + 10 * minute + r}.5"^^<{DEC}>'} for r in range(3)
        ] + [{"room": f"<{EX}gw1/room3>"}]
    parts = [results[(e["windowStart"], e["id"])] for e in big]
    assert [len(p) for p in parts] == [500, 200]
    assert [row["sensor"] for p in parts for row in p] == [f"<{EX}gw1/sensor/s{i}>" for i in range(700)]
    # The part each event is, read off its id: the rows' order across parts, whatever order they landed in.
    assert query(db, "SELECT event_id, part FROM instance_results WHERE query = 'sensors-seen' ORDER BY part") == [
        (e["id"], part) for part, e in enumerate(big)]
    assert {p for (p,) in query(db, "SELECT part FROM instance_results WHERE query = 'co2-per-room'")} == {0}
    row = query(db, "SELECT gateway, query, window_end, operator FROM instance_results WHERE event_id = ?",
                (co2(2)[0]["id"],))
    assert row == [("gw1", "co2-per-room", 1_800_000_000_000 + 3 * 60_000, "RSTREAM")]
    assert query(db, "SELECT count FROM matches_per_minute WHERE pattern = 'fire'") == [(1,)]
