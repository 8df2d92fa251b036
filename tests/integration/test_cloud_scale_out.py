"""Ingest workers sharing the gateways' events through an MQTT 5 shared subscription, on a real Mosquitto."""
from __future__ import annotations

import os
import random
import signal
import threading
import time
from typing import Any

import psutil
import pytest

from cloud_harness import CloudProcess, match_counts, query, total_events, wait_for, write_config
from cloud_workload import make_workload, publish
from edgewave.cloud.landing import read_records
from edgewave.shared.broker import BrokerSettings
from edgewave.shared.events import encode_event
from edgewave.shared.mqtt_client import new_client
from edgewave.shared.topics import events_topic
from edgewave.shared.uplink_batch import encode_batch


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


def as_messages(sequence: list[dict[str, Any]], batch_share: float, seed: int) -> list[tuple[str, bytes, int]]:
    """The gateways' publish order as MQTT messages (gateway, payload, events in it): most events
    alone, about ``batch_share`` of them in batches of 2 to 12 consecutive events of one gateway
    (shared/uplink_batch.py), each batch sent where its last event would have been."""
    rng = random.Random(seed)
    open_batches: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    messages: list[tuple[str, bytes, int]] = []
    for event in sequence:
        gw = event["gateway"]
        if gw not in open_batches and rng.random() < batch_share / 6:
            open_batches[gw] = (rng.randint(2, 12), [])
        if gw in open_batches:
            size, events = open_batches[gw]
            events.append(event)
            if len(events) == size:
                messages.append((gw, encode_batch(events), size))
                del open_batches[gw]
        else:
            messages.append((gw, encode_event(event), 1))
    for gw, (_, events) in open_batches.items():
        messages.append((gw, encode_batch(events), len(events)))
    return messages


def publish_messages(host: str, port: int, messages: list[tuple[str, bytes, int]], rate: float,
                     progress: list[int]) -> None:
    """QoS 1, one client per gateway, ``rate`` messages/s; ``progress[0]`` counts messages sent."""
    clients: dict[str, Any] = {}
    infos = []
    started = time.monotonic()
    try:
        for n, (gw, payload, _) in enumerate(messages, 1):
            if gw not in clients:
                client = new_client(BrokerSettings(host=host, port=port), f"test-agent-{gw}", max_inflight=1000)
                client.connect(host, port)
                client.loop_start()
                clients[gw] = client
            infos.append(clients[gw].publish(events_topic(gw), payload, qos=1))
            progress[0] = n
            ahead = n / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
        for info in infos:
            info.wait_for_publish(timeout=120)
            assert info.is_published(), "the broker did not acknowledge a publish within 120 s"
    finally:
        for client in clients.values():
            client.disconnect()
            client.loop_stop()


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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_workers_one_killed_while_ten_gateways_publish_count_every_event_once(tmp_path, mqtt_broker):
    """`edgewave-cloud run --ingest-workers 3`; 10 gateways publish single events and batches, with
    resends and events out of order; ingest worker 2 is SIGKILLed mid-stream. The aggregates in SQLite
    equal those of the events sent, each counted once."""
    workload = make_workload(unique=4000, duplicates=300, out_of_order=150, gateways=10, seed=31)
    messages = as_messages(workload.sequence, batch_share=0.2, seed=32)
    in_batches = sum(n for _, _, n in messages if n > 1)
    assert sum(n for _, _, n in messages) == len(workload.sequence)
    assert 0.1 * len(workload.sequence) < in_batches < 0.35 * len(workload.sequence), in_batches
    config = write_config(tmp_path, mqtt_broker)
    landing = tmp_path / "landing" / "events"
    db = tmp_path / "cloud.db"
    cloud = CloudProcess(["run", "--config", str(config), "--ingest-workers", "3"], tmp_path / "run.log")
    try:
        wait_for(lambda: cloud.log().count("ingest connected") >= 3, 90, "three workers to connect", alive=cloud)
        progress = [0]
        killed_at: list[int] = []

        def kill_worker_2_midway() -> None:
            wait_for(lambda: len(list(landing.rglob("*-w2.jsonl*"))) > 0, 90, "worker 2 to land events")
            pid = worker_pid(cloud, 2)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            killed_at.append(progress[0])

        killer = threading.Thread(target=kill_worker_2_midway)
        killer.start()
        publish_messages(mqtt_broker.host, mqtt_broker.port, messages, rate=300, progress=progress)
        killer.join(timeout=120)
        assert killed_at, "worker 2 was not killed"
        assert killed_at[0] < len(messages) * 0.8, f"worker 2 was killed after message {killed_at[0]} of {len(messages)}"
        wait_for(lambda: total_events(db) >= len(workload.unique), 240, "the Spark job to count every event",
                 alive=cloud, interval=0.5)
        time.sleep(5)   # a batch counting anything twice would have committed by now
        assert total_events(db) == len(workload.unique)
        assert match_counts(db) == workload.expected_matches()
        bindings = {(p, v, val): c for p, v, val, c in
                    query(db, "SELECT pattern, variable, value, count FROM binding_values")}
        assert bindings == workload.expected_bindings()
        significant = {(g, s, p, m): c for g, s, p, m, c in query(
            db, "SELECT gateway, sensor, property, minute_ms, count FROM significant_per_minute")}
        assert significant == workload.expected_significant()
        records = read_records(landing)
        assert {r["id"] for r in records} == {e["id"] for e in workload.unique}
        files = {w: len(list(landing.rglob(f"*-{w}.jsonl"))) for w in ("w0", "w1", "w2")}
        assert all(files.values()), f"every worker landed files: {files}"
        log = cloud.log()
        assert "service child=ingest-2 exited" in log, "the killed worker was noticed"
        assert log.count("service started child=ingest-2") == 2, "and restarted"
        assert not query(db, "SELECT reason FROM rejected_records"), "nothing was rejected"
    finally:
        assert cloud.stop() == 0
