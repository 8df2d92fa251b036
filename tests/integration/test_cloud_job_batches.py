"""The Spark job over several micro-batches: rejected lines of later batches are each stored once (identical
lines too, and whatever their ingest time), redeliveries are dropped, and an event older than the
de-duplication horizon is dropped as late, counted on the progress line and warned about. A checkpoint
begun with the plan that reads each file twice resumes with it and gives the exact aggregates; a fresh one
reads each file once."""
from __future__ import annotations

import json
import os
import time
from collections import Counter

import pyarrow.parquet as pq
import pytest

from cloud_harness import (CloudProcess, aggregate_counts, fill_landing_zone, landing_record, query,
                           total_events, write_config)
from cloud_workload import make_workload

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def line(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"))


def test_rejected_lines_in_later_batches_duplicates_and_late_events(tmp_path):
    events = make_workload(unique=160, duplicates=0, out_of_order=0, gateways=2, seed=31).unique
    now = int(time.time() * 1000)
    two_hours = 2 * 3600 * 1000
    partition = tmp_path / "landing" / "events" / "date=2026-01-01"
    partition.mkdir(parents=True)
    torn = line(landing_record(events[0], now))[:60]

    def write(name: str, lines: list[str], order: int) -> None:
        path = partition / name
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (now / 1000 - 100 + order, now / 1000 - 100 + order))  # the file source's order

    write("part-1.jsonl", [line(landing_record(e, now + i)) for i, e in enumerate(events[:100])], 0)
    old_bad = line({**landing_record(events[151], now - two_hours), "kind": "x"})
    write("part-2.jsonl", [line(landing_record(e, now + 1000 + i)) for i, e in enumerate(events[100:150])] + [
        torn, torn,                                        # two identical bad lines
        line(landing_record(events[5], now + 2000)),       # a redelivery of batch 0's
    ], 1)
    # Spark drops as late what is older than the watermark of the batch before: from batch 2 on.
    write("part-3.jsonl", [torn, line(landing_record(events[152], now + 3000)),
                           old_bad,                                           # bad, and old
                           line(landing_record(events[150], now - two_hours))],  # valid, older than the horizon
          2)

    config = write_config(tmp_path, spark={"max_files_per_trigger": 1, "dedup_horizon": "15 minutes"})
    job = CloudProcess(["spark", "--config", str(config), "--available-now"], tmp_path / "job.log")
    assert job.wait(timeout=300) == 0, job.log()[-3000:]
    log = job.log()
    assert "twice" not in log                 # a fresh checkpoint: each file read once
    db = tmp_path / "cloud.db"

    assert total_events(db) == 100 + 50 + 1
    assert query(db, "SELECT batch_id, rows, rejected FROM committed_batches ORDER BY batch_id") == [
        (0, 100, 0), (1, 50, 2), (2, 1, 2)]
    rejected = Counter((batch, source.rsplit("/", 1)[-1], reason, record) for batch, source, reason, record in query(
        db, "SELECT batch_id, source_file, reason, record FROM rejected_records"))
    assert rejected == Counter({
        (1, "part-2.jsonl", "not JSON", torn): 2,
        (2, "part-3.jsonl", "not JSON", torn): 1,
        (2, "part-3.jsonl", "unknown kind 'x'", old_bad): 1,
    })
    assert "progress batch=1 rows_in=53 " in log and "dropped_late=1" not in log.split("progress batch=2 ")[0]
    assert "progress batch=2 rows_in=4 " in log and "dropped late batch=2 events=1:" in log

    history = tmp_path / "history" / "events"
    ids = {b: set(pq.read_table(history / f"batch_id={b}").column("id").to_pylist()) for b in (0, 1, 2)}
    assert ids[0] == {e["id"] for e in events[:100]}
    assert ids[1] == {e["id"] for e in events[100:150]}
    assert ids[2] == {events[152]["id"]}


def test_a_checkpoint_begun_with_two_scans_resumes_with_them_and_gives_the_same_aggregates(tmp_path):
    from edgewave.cloud.job import checkpoint_reads_twice, start_query
    from edgewave.cloud.settings import load_settings
    from edgewave.cloud.spark_runtime import build_session, spark_conf, write_log4j_config

    workload = make_workload(unique=1500, duplicates=150, out_of_order=100, gateways=3, seed=33)
    half = len(workload.sequence) // 2
    landing = tmp_path / "landing" / "events"
    fill_landing_zone(landing / "date=2026-01-01", workload.sequence[:half])
    old = tmp_path / "old"
    old.mkdir()
    settings = load_settings(write_config(old, landing_zone=str(tmp_path / "landing")))
    spark = build_session(settings.spark, "local[2]", spark_conf(settings.spark, write_log4j_config(
        old / "spark-conf", "WARN").resolve()))
    try:
        stream = start_query(spark, settings, available_now=True, two_scans=True)  # as an earlier version did
        stream.awaitTermination(300)
        assert stream.exception() is None
        assert checkpoint_reads_twice(spark, settings.spark.checkpoint)
    finally:
        spark.stop()
    assert total_events(old / "cloud.db") == len({e["id"] for e in workload.sequence[:half]})

    fill_landing_zone(landing / "date=2026-01-02", workload.sequence[half:])
    (landing / "date=2026-01-02" / "bad.jsonl").write_text('{"id":\nnot json\n')
    job = CloudProcess(["spark", "--config", str(old / "cloud.yaml"), "--available-now"], old / "job.log")
    assert job.wait(timeout=300) == 0, job.log()[-3000:]
    assert "reads each landing file twice: resuming it with that plan" in job.log()

    assert total_events(old / "cloud.db") == len(workload.unique)
    assert aggregate_counts(old / "cloud.db") == workload.expected_counts()
    assert query(old / "cloud.db", "SELECT reason, COUNT(*) FROM rejected_records GROUP BY reason") == [("not JSON", 2)]
