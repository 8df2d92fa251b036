"""Ingest workers sharing the gateways' events through an MQTT 5 shared subscription, on a real Mosquitto."""
from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from cloud_harness import CloudProcess, match_counts, total_events, wait_for, write_config
from cloud_workload import make_workload, publish
from edgewave.cloud.landing import read_records


def worker_pid(cloud: CloudProcess, worker: int) -> int | None:
    """The pid of ingest worker ``worker`` among the service's children."""
    for child in psutil.Process(cloud.proc.pid).children(recursive=True):
        try:
            argv = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "ingest" in argv and argv[-2:] == ["--worker", str(worker)]:
            return child.pid
    return None


@pytest.mark.slow
def test_two_workers_share_the_events_and_killing_one_loses_none(tmp_path, mqtt_broker):
    workload = make_workload(unique=3000, duplicates=0, out_of_order=0, gateways=4)
    config = write_config(tmp_path, mqtt_broker)
    cloud = CloudProcess(["run", "--config", str(config), "--ingest-workers", "2"], tmp_path / "run.log")
    try:
        wait_for(lambda: cloud.log().count("ingest connected") >= 2, 60, "both workers to connect", alive=cloud)
        killed = threading.Event()

        def kill_worker_1_midway() -> None:
            landing = tmp_path / "landing" / "events"
            wait_for(lambda: len(list(landing.rglob("*-w1.jsonl*"))) > 0, 60, "worker 1 to land events")
            pid = worker_pid(cloud, 1)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed.set()

        killer = threading.Thread(target=kill_worker_1_midway)
        killer.start()
        publish(mqtt_broker.host, mqtt_broker.port, workload.sequence, rate=600)
        killer.join(timeout=90)
        assert killed.is_set(), "worker 1 was not killed while gateways published"
        wait_for(lambda: total_events(tmp_path / "cloud.db") >= len(workload.unique), 180,
                 "the Spark job to count every event", alive=cloud)
        time.sleep(3)
        assert match_counts(tmp_path / "cloud.db") == workload.expected_matches()
        assert total_events(tmp_path / "cloud.db") == len(workload.unique)
        records = read_records(tmp_path / "landing" / "events")
        by_worker = {w: sum(1 for p in (tmp_path / "landing" / "events").rglob(f"*-{w}.jsonl")) for w in ("w0", "w1")}
        assert by_worker["w0"] > 0 and by_worker["w1"] > 0, f"both workers landed files: {by_worker}"
        assert {r["id"] for r in records} == {e["id"] for e in workload.unique}
        log = cloud.log()
        assert "service child=ingest-1 exited" in log, "the killed worker was noticed"
        assert log.count("service started child=ingest-1") == 2, "and restarted"
    finally:
        assert cloud.stop() == 0


@pytest.mark.slow
def test_fewer_workers_than_before_retire_the_others_sessions_after_landing_their_share(tmp_path, mqtt_broker):
    """A stopped worker's session keeps receiving its share of the events: going from 2 workers to 1,
    worker 1 must land what its session holds and end it, or that share would wait there for days."""
    config = write_config(tmp_path, mqtt_broker, ingest={"retire_idle_s": 2})
    landing = tmp_path / "landing" / "events"
    first = make_workload(unique=400, duplicates=0, out_of_order=0, gateways=2, seed=11)
    cloud = CloudProcess(["run", "--config", str(config), "--ingest-workers", "2"], tmp_path / "run-2.log")
    try:
        wait_for(lambda: cloud.log().count("ingest connected") >= 2, 60, "both workers to connect", alive=cloud)
    finally:
        assert cloud.stop() == 0
    # Both sessions wait on the broker, and each is handed its share of what gateways send now.
    publish(mqtt_broker.host, mqtt_broker.port, first.sequence)
    cloud = CloudProcess(["run", "--config", str(config), "--ingest-workers", "1"], tmp_path / "run-1.log")
    try:
        wait_for(lambda: "service child=ingest-1-retiring finished" in cloud.log(), 90,
                 "worker 1 to retire", alive=cloud)
        assert {r["id"] for r in read_records(landing)} == {e["id"] for e in first.unique}
        assert len(list(landing.rglob("*-w1.jsonl"))) > 0, "worker 1 landed the share its session held"
        # Its session is gone: everything sent from now on reaches worker 0.
        later = make_workload(unique=300, duplicates=0, out_of_order=0, gateways=2, seed=12)
        files_of_w1 = set(landing.rglob("*-w1.jsonl"))
        publish(mqtt_broker.host, mqtt_broker.port, later.sequence)
        wanted = {e["id"] for e in first.unique + later.unique}
        wait_for(lambda: {r["id"] for r in read_records(landing)} == wanted, 60, "worker 0 to land the rest",
                 alive=cloud)
        assert set(landing.rglob("*-w1.jsonl")) == files_of_w1
        assert (tmp_path / "landing" / "ingest-workers.json").read_text() == '{"workers": 1}'
    finally:
        assert cloud.stop() == 0
