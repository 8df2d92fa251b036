"""The Spark job killed -9 between batches, mid-batch, and right after its SQLite commit: exact on restart."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cloud_harness import (CloudProcess, committed, fill_landing_zone, job_caught_up, match_counts, query,
                           total_events, wait_for, write_config)
from cloud_workload import make_workload

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def batches_started(checkpoint: Path) -> set[int]:
    offsets = checkpoint / "offsets"
    return {int(p.name) for p in offsets.iterdir() if p.name.isdigit()} if offsets.is_dir() else set()


def sqlite_batches(db: Path) -> set[int]:
    return {r[0] for r in query(db, "SELECT batch_id FROM committed_batches")}


def test_kills_between_and_mid_batch_and_after_commit_count_everything_once(tmp_path):
    workload = make_workload(unique=3000, duplicates=400, out_of_order=200, gateways=5, seed=11)
    (tmp_path / "other").mkdir()
    files = fill_landing_zone(tmp_path / "landing" / "events", workload.sequence)
    assert files >= 25
    config = write_config(tmp_path, spark={"max_files_per_trigger": 4, "trigger_seconds": 1})
    checkpoint, db = tmp_path / "checkpoint", tmp_path / "cloud.db"
    spark_args = ["spark", "--config", str(config)]

    # 1. Between batches: batch N committed by Spark, batch N+1 not started.
    job = CloudProcess(spark_args, tmp_path / "job1.log")
    try:
        wait_for(lambda: (done := committed(checkpoint)) and len(done) >= 2 and max(done) == max(
            batches_started(checkpoint)), 180, "a moment between batches", interval=0.01, alive=job)
    finally:
        job.kill9()
    between = max(committed(checkpoint))
    assert sqlite_batches(db) == set(range(between + 1))

    # 2. Mid-batch: Spark has planned batch N (offsets written) but not applied it to SQLite.
    job = CloudProcess(spark_args, tmp_path / "job2.log")
    try:
        def mid_batch() -> bool:
            started, done = batches_started(checkpoint), committed(checkpoint)
            return bool(started) and max(started) > between + 1 and max(started) not in done and \
                max(started) not in sqlite_batches(db)
        wait_for(mid_batch, 180, "a batch in flight", interval=0.01, alive=job)
    finally:
        job.kill9()
    in_flight = max(batches_started(checkpoint))
    assert in_flight not in committed(checkpoint)

    # 3. The worst moment: SQLite committed batch K, Spark had not yet recorded it as done.
    target = in_flight + 2
    job = CloudProcess(spark_args, tmp_path / "job3.log", env={"EDGEWAVE_FAILPOINT": f"after_sqlite:{target}"})
    assert job.wait(timeout=240) == -9, job.log()[-3000:]
    assert target in sqlite_batches(db) and target not in committed(checkpoint)
    counted_before_replay = total_events(db)

    # 4. Restart and run to the end.
    job = CloudProcess(spark_args, tmp_path / "job4.log")
    try:
        wait_for(lambda: job_caught_up(tmp_path / "landing" / "events", checkpoint), 300,
                 "the job to take every landing file", interval=0.5, alive=job)
    finally:
        assert job.stop() == 0, job.log()[-3000:]
    log = job.log()
    assert f"aggregates batch={target} " in log and "already committed: replayed batch" in log
    assert total_events(db) > counted_before_replay
    assert match_counts(db) == workload.expected_matches()
    assert total_events(db) == len(workload.unique)
    # Parquet history (overwritten per batch id on replay) holds each event exactly once.
    history = pq.read_table(tmp_path / "history" / "events").column("id").to_pylist()
    assert len(history) == len(set(history)) == len(workload.unique)

    # The checkpoint and the database belong together: mixing them up is refused before Spark starts.
    other = write_config(tmp_path / "other", spark={"checkpoint": str(tmp_path / "fresh-checkpoint")},
                         database=str(db), landing_zone=str(tmp_path / "landing"))
    fresh = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "spark", "--config", str(other)],
                           capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 2 and "would count the landing zone again" in fresh.stderr, fresh.stderr
    other = write_config(tmp_path / "other", spark={"checkpoint": str(checkpoint)},
                         database=str(tmp_path / "other" / "empty.db"), landing_zone=str(tmp_path / "landing"))
    lost = subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "spark", "--config", str(other)],
                          capture_output=True, text=True, timeout=120)
    assert lost.returncode == 2 and "has processed batches" in lost.stderr, lost.stderr
