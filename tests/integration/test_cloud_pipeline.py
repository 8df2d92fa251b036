"""`edgewave-cloud run` end to end: gateways publish to Mosquitto, ingest lands, Spark aggregates to SQLite."""
from __future__ import annotations

import pytest

from cloud_harness import (CloudProcess, aggregates_snapshot, job_caught_up, match_counts, query,
                           rollup_mismatches, total_events, wait_for, write_config)
from cloud_workload import make_workload, publish
from edgewave.cloud.aggregates import delay_bucket

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_10000_events_with_duplicates_and_disorder_give_exact_counts(tmp_path, mqtt_broker):
    workload = make_workload(unique=9000, duplicates=1000, out_of_order=500, gateways=5)
    assert len(workload.sequence) == 10_000 and workload.out_of_order == 500
    config = write_config(tmp_path, mqtt_broker)
    cloud = CloudProcess(["run", "--config", str(config)], tmp_path / "run.log")
    db = tmp_path / "cloud.db"
    try:
        wait_for(lambda: "ingest connected" in cloud.log(), 60, "ingest to connect", alive=cloud)
        wait_for(lambda: "query started" in cloud.log(), 180, "the Spark query to start", alive=cloud)
        publish(mqtt_broker.host, mqtt_broker.port, workload.sequence)
        wait_for(lambda: total_events(db) >= len(workload.unique), 240, "all events counted", alive=cloud,
                 interval=1.0)
        # Until the job has taken every landing file: late duplicates must not add anything.
        wait_for(lambda: job_caught_up(tmp_path / "landing" / "events", tmp_path / "checkpoint"), 120,
                 "the job to take every landing file", alive=cloud, interval=1.0)
    finally:
        assert cloud.stop() == 0, cloud.log()[-3000:]
    assert match_counts(db) == workload.expected_matches()
    assert total_events(db) == len(workload.unique)
    snapshot = aggregates_snapshot(db)
    assert {(p, v, val): c for p, v, val, c in snapshot["binding_values"]} == workload.expected_bindings()
    assert {(g, s, p, m): c for g, s, p, m, c in snapshot["significant_per_minute"]} == \
        workload.expected_significant()
    # The most frequent fire room, as the dashboard asks for it.
    top = query(db, "SELECT value FROM binding_top WHERE pattern = 'fire' AND variable = 'room' AND rank = 1")
    expected_top = max(((v, c) for (p, _, v), c in workload.expected_bindings().items() if p == "fire"),
                       key=lambda vc: vc[1])[0]
    assert top == [(expected_top,)]
    # Delays (ingest time - match time) for one minute, against the landing zone's truth. Of an
    # event's copies the de-duplication keeps one (the first to arrive, or any copy when copies
    # share a micro-batch), so the sum lies between the sums over the earliest and latest copies.
    from edgewave.cloud.landing import read_records

    copies: dict[str, list[int]] = {}
    minute, kind, count, sum_ms, lo, hi, p50, p95 = snapshot["delay_per_minute"][0]
    for record in read_records(tmp_path / "landing" / "events"):
        if record["windowEnd"] // 60000 * 60000 == minute and record["kind"] == kind:
            copies.setdefault(record["id"], []).append(record["ingestTime"] - record["windowEnd"])
    assert count == len(copies)
    assert sum(min(d) for d in copies.values()) <= sum_ms <= sum(max(d) for d in copies.values())
    assert min(min(d) for d in copies.values()) <= lo <= hi <= max(max(d) for d in copies.values())
    assert lo <= p50 <= p95 <= hi
    # Spark's bucketing (SQL) agrees with aggregates.delay_bucket: every bucket is a 3-digit cut,
    # and each minute's histogram holds exactly that minute's events.
    buckets = [(m, k, b, n) for m, k, b, n in snapshot["delay_histogram"]]
    assert buckets and all(delay_bucket(b) == b and b >= 1000 for _, _, b, _ in buckets)
    assert sum(n for m, k, _, n in buckets if (m, k) == (minute, kind)) == count
    assert {delay_bucket(min(d)) for d in copies.values()} | {delay_bucket(max(d)) for d in copies.values()} >= \
        {b for m, k, b, _ in buckets if (m, k) == (minute, kind)}
    assert "progress batch=" in (tmp_path / "run.log").read_text()
    # The per-hour and per-day sums the job's transactions wrote beside the minute rows, and the
    # dashboard's totals read through them for a range with partial hours at both ends.
    from edgewave.cloud.dashboard import queries

    assert rollup_mismatches(db) == []
    minutes = [m for (_, _, m) in workload.expected_matches()]
    start, end = min(minutes) - 2 * 3_600_000 - 7, max(minutes) + 2 * 3_600_000 + 11
    expected: dict[str, int] = {}
    for (_, pattern, _), count in workload.expected_matches().items():
        expected[pattern] = expected.get(pattern, 0) + count
    with queries.Reader(db).query() as q:
        assert q.has_rollups
        assert queries.pattern_totals(q, start, end) == expected
        assert sum(d.count for d in queries.delay_summary(q, start, end)) == total_events(db)
