"""Ingest against a real Mosquitto: events land durably, status/acks reach SQLite, kill -9 loses nothing."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from cloud_harness import CloudProcess, query, wait_for, write_config
from cloud_workload import make_workload, publish
from edgewave.cloud.landing import read_records
from edgewave.cloud.live_feed import read_feed
from edgewave.cloud.settings import CloudSettings
from edgewave.shared import topics
from edgewave.shared.events import encode_event


def start_ingest(tmp_path, config, name="ingest"):
    proc = CloudProcess(["ingest", "--config", str(config)], tmp_path / f"{name}.log")
    wait_for(lambda: "ingest connected" in proc.log(), 30, "ingest to connect", alive=proc)
    return proc


def raw_publish(broker, items):
    """Publish (topic, payload, retain) at QoS 1 and wait for the broker's acks."""
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        infos = [client.publish(topic, payload, qos=1, retain=retain) for topic, payload, retain in items]
        for info in infos:
            info.wait_for_publish(timeout=30)
    finally:
        client.disconnect()
        client.loop_stop()


def test_events_status_and_acks_are_stored(tmp_path, mqtt_broker):
    config = write_config(tmp_path, mqtt_broker)
    events = make_workload(unique=40, duplicates=0, out_of_order=0, gateways=2).sequence
    ingest = start_ingest(tmp_path, config)
    try:
        before = int(time.time() * 1000)
        publish(mqtt_broker.host, mqtt_broker.port, events)
        raw_publish(mqtt_broker, [
            (topics.status_topic("gw1"), json.dumps({"state": "online", "config_version": 3}).encode(), True),
            (topics.config_ack_topic("gw1"),
             json.dumps({"gateway": "gw1", "version": 4, "status": "rejected", "reason": "bad signature"}).encode(),
             False),
            (topics.events_topic("gw1"), b"not json at all", False),
            (topics.events_topic("gw2"), encode_event(events[0]), False),  # gw1's event on gw2's topic
        ])
        landing = tmp_path / "landing"
        wait_for(lambda: len(read_records(landing / "events")) >= len(events), 30, "events to land", alive=ingest)
        wait_for(lambda: len(read_records(landing / "rejected")) >= 2, 30, "rejects to land", alive=ingest)
    finally:
        assert ingest.stop() == 0
    records = read_records(tmp_path / "landing" / "events")
    assert sorted(r["id"] for r in records) == sorted(e["id"] for e in events)
    by_id = {e["id"]: e for e in events}
    for record in records:
        assert before <= record["ingestTime"] <= int(time.time() * 1000)
        expected = {k: v for k, v in by_id[record["id"]].items() if k != "@context"}
        assert {k: v for k, v in record.items() if k != "ingestTime"} == expected
    # The live feed shows each landed event once (the gw1 event on gw2's topic was rejected), as landed.
    feed = read_feed(tmp_path / "live.db", limit=1000)
    assert sorted(r["id"] for r in feed) == sorted(e["id"] for e in events)
    landed_at = {r["id"]: r["ingestTime"] for r in records}
    assert all(r["ingest_ms"] == landed_at[r["id"]] for r in feed)
    rejected = read_records(tmp_path / "landing" / "rejected")
    reasons = sorted(r["reason"] for r in rejected)
    assert reasons[0].startswith("event for gateway 'gw1' published on ew/gw2/events")
    assert reasons[1].startswith("not JSON")
    assert any(r.get("payload") == "not json at all" for r in rejected)
    # a clean stop leaves no open file behind
    assert not list((tmp_path / "landing").rglob("*.inprogress"))
    db = tmp_path / "cloud.db"
    assert query(db, "SELECT gateway, state, config_version FROM gateways") == [("gw1", "online", 3)]
    assert query(db, "SELECT gateway, state FROM status_history") == [("gw1", "online")]
    assert query(db, "SELECT gateway, version, status, reason FROM config_acks") == [
        ("gw1", 4, "rejected", "bad signature")]


def test_retained_status_is_not_recorded_twice_across_restarts(tmp_path, mqtt_broker):
    config = write_config(tmp_path, mqtt_broker)
    raw_publish(mqtt_broker, [(topics.status_topic("gw3"), b'{"state": "online"}', True)])
    for run in range(2):
        ingest = start_ingest(tmp_path, config, name=f"ingest{run}")
        try:
            wait_for(lambda: query(tmp_path / "cloud.db", "SELECT state FROM gateways"), 30, "status", alive=ingest)
        finally:
            ingest.stop()
    assert query(tmp_path / "cloud.db", "SELECT COUNT(*) FROM status_history") == [(1,)]


@pytest.mark.slow
def test_kill9_while_gateways_publish_loses_nothing(tmp_path, mqtt_broker):
    """Ingest is killed -9 twice in mid-stream; the broker queues for its session; every event lands."""
    config = write_config(tmp_path, mqtt_broker)
    events = make_workload(unique=4000, duplicates=0, out_of_order=0, gateways=5).sequence
    ingest = start_ingest(tmp_path, config, "ingest0")
    landing = tmp_path / "landing" / "events"
    failure: list[BaseException] = []

    def gateways_publish() -> None:
        try:
            publish(mqtt_broker.host, mqtt_broker.port, events, rate=800)
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)

    publisher = threading.Thread(target=gateways_publish)
    publisher.start()
    try:
        for run in (1, 2):
            landed = len(read_records(landing))
            wait_for(lambda: len(read_records(landing)) > landed + 500, 60, "events to land", alive=ingest)
            ingest.kill9()
            time.sleep(1.0)  # gateways keep publishing; the broker queues for the ingest session
            ingest = start_ingest(tmp_path, config, f"ingest{run}")
        publisher.join(timeout=120)
        assert not failure, failure
        wanted = {e["id"] for e in events}
        wait_for(lambda: wanted <= {r["id"] for r in read_records(landing)}, 60, "every event to land", alive=ingest)
    finally:
        publisher.join(timeout=120)
        ingest.stop()
    records = read_records(landing)
    ids = [r["id"] for r in records]
    assert set(ids) == {e["id"] for e in events}
    # Redelivery after a crash may duplicate (the Spark job drops those by id), never lose: at most what
    # the broker had in flight to the killed session, ingest.receive_maximum, for each of the two kills.
    # (A loaded run landed exactly 1,000 duplicates: a full window at one kill.)
    assert len(ids) - len(set(ids)) <= 2 * CloudSettings().ingest.receive_maximum


def test_sigusr1_writes_every_threads_stack_and_the_process_goes_on(tmp_path, mqtt_broker):
    """What an operator (or the test harness, before a SIGKILL) uses to see where a cloud
    process that does not stop is stuck."""
    ingest = start_ingest(tmp_path, write_config(tmp_path, mqtt_broker))
    try:
        os.kill(ingest.proc.pid, signal.SIGUSR1)
        wait_for(lambda: "Current thread" in ingest.log() and "most recent call first" in ingest.log(), 30,
                 "the stacks in the log", alive=ingest)
        assert "edgewave/cloud/" in ingest.log() or "cloud/ingest.py" in ingest.log(), ingest.log()[-2000:]
        assert ingest.running
    finally:
        assert ingest.stop() == 0, ingest.log()[-2000:]


def test_each_gateway_is_told_the_keys_of_what_landed_after_the_fsync_and_of_what_was_quarantined(tmp_path,
                                                                                              mqtt_broker):
    """End to end (shared/landed_acks.py): after a group commit, ingest publishes on
    ew/<gw>/events/landed the keys (Correlation Data) of that gateway's messages it holds now,
    landed or quarantined, and only to that gateway's topic. A key that is not short printable
    ASCII is not echoed."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    from edgewave.shared.landed_acks import decode_landed

    config = write_config(tmp_path, mqtt_broker)
    events = make_workload(unique=6, duplicates=0, out_of_order=0, gateways=1).sequence
    acks: dict[str, list[str]] = {"gw1": [], "gw2": []}
    landed_when_acked: list[int] = []
    listener = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)

    def on_message(c, u, msg) -> None:  # noqa: ANN001
        acks[topics.gateway_from_topic(msg.topic)].extend(decode_landed(msg.payload))
        # what the landing files hold when the acknowledgement arrives (closed or still open)
        landed_when_acked.append(sum(path.read_bytes().count(b"\n")
                                     for path in (tmp_path / "landing" / "events").rglob("*") if path.is_file()))

    listener.on_message = on_message
    listener.connect(mqtt_broker.host, mqtt_broker.port)
    listener.subscribe([(topics.landed_topic("gw1"), 1), (topics.landed_topic("gw2"), 1)])
    listener.loop_start()
    ingest = start_ingest(tmp_path, config)
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(mqtt_broker.host, mqtt_broker.port)
    client.loop_start()
    try:
        def keyed(topic: str, payload: bytes, key: bytes) -> None:
            props = Properties(PacketTypes.PUBLISH)
            props.CorrelationData = key
            client.publish(topic, payload, qos=1, properties=props).wait_for_publish(timeout=30)

        gw = events[0]["gateway"]
        for i, event in enumerate(events):
            keyed(topics.events_topic(gw), encode_event(event), f"abc:{i + 1}-{i + 1}".encode())
        keyed(topics.events_topic(gw), b"not json", b"abc:7-7")                   # quarantined: landed all the same
        keyed(topics.events_topic(gw), encode_event(events[0]), b"\x00binary")    # not echoed
        keyed(topics.events_topic("gw2"), encode_event(events[0]), b"abc:1-1")    # another gateway's: quarantined
        wait_for(lambda: len(acks[gw]) >= 7 and acks["gw2"], 30, "the acknowledgements", alive=ingest)
        time.sleep(0.5)
    finally:
        client.disconnect()
        client.loop_stop()
        assert ingest.stop() == 0
        listener.disconnect()
        listener.loop_stop()
    assert gw == "gw1"
    assert sorted(acks["gw1"]) == sorted(f"abc:{i}-{i}" for i in range(1, 8))   # each once, no binary key
    assert acks["gw2"] == ["abc:1-1"]
    assert landed_when_acked and landed_when_acked[0] >= 1      # the event was in the landing files first
    assert "landed_acks=" in ingest.log()
