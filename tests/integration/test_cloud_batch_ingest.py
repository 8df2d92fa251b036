"""Batches of events against the real cloud (Mosquitto, ingest, Spark): the same events land as when
sent one by one, single events from agents not yet upgraded still land beside them, a bad batch is
quarantined whole, and an invalid event of a batch alone."""
from __future__ import annotations

import hashlib
import re
import time
import zlib

import pytest

from cloud_harness import CloudProcess, match_counts, total_events, wait_for, write_config
from cloud_workload import make_workload
from edgewave.cloud.landing import read_records
from edgewave.cloud.live_feed import read_feed
from edgewave.shared import topics
from edgewave.shared.events import encode_event
from edgewave.shared.uplink_batch import HEADER, MAGIC, encode_batch
from test_cloud_ingest import raw_publish, start_ingest


def landed_form(event: dict) -> dict:
    return {k: v for k, v in event.items() if k != "@context"}


def batches(events: list[dict], sizes: tuple[int, ...]) -> list[list[dict]]:
    """``events`` cut into consecutive batches, their sizes cycling through ``sizes``."""
    out, i, n = [], 0, 0
    while i < len(events):
        size = sizes[n % len(sizes)]
        out.append(events[i:i + size])
        i, n = i + size, n + 1
    return out


def test_batches_land_the_same_events_beside_single_ones_and_bad_ones_are_quarantined(tmp_path, mqtt_broker):
    config = write_config(tmp_path, mqtt_broker, ingest={"roll_seconds": 1, "commit_interval_ms": 20,
                                                         "limits": {"max_batch_bytes": 200_000}})
    workload = make_workload(unique=120, duplicates=0, out_of_order=0, gateways=2)
    old = [e for e in workload.sequence if e["gateway"] == "gw1"]    # an agent sending one event a message
    new = [e for e in workload.sequence if e["gateway"] == "gw2"]    # an upgraded one, in batches
    good = batches(new[:-2], (1, 8, 32))
    invalid = {**new[0], "id": new[0]["id"][:-4] + "beef", "kind": "other"}       # fails only its own checks
    alien = {**old[0], "id": old[0]["id"][:-4] + "f00d"}                          # gw1's event in gw2's batch
    mixed = encode_batch([new[-2], invalid, new[-1], alien])
    bomb = HEADER.pack(MAGIC, 1, 0, 1, 50_000_000) + zlib.compress(b"[" * 50_000_000, 9)
    garbage = bytes((MAGIC,)) + b"\x01\x00\x00\x01\x00\x00\x00\x10" + b"no zlib here"
    oversized = encode_batch(new) + b"\x00" * 200_000                           # over max_batch_bytes
    gw2 = topics.events_topic("gw2")
    ingest = start_ingest(tmp_path, config)
    try:
        raw_publish(mqtt_broker, [(topics.events_topic("gw1"), encode_event(e), False) for e in old]
                    + [(gw2, encode_batch(b), False) for b in good]
                    + [(gw2, p, False) for p in (mixed, bomb, garbage, oversized)])
        landing = tmp_path / "landing"
        expected = len(old) + len(new)
        wait_for(lambda: len(read_records(landing / "events")) >= expected, 60, "events to land", alive=ingest)
        wait_for(lambda: len(read_records(landing / "rejected")) >= 5, 30, "rejects to land", alive=ingest)
        time.sleep(1)
    finally:
        assert ingest.stop() == 0

    records = read_records(landing / "events")
    by_id = {r["id"]: r for r in records}
    assert len(records) == len(by_id) == expected
    for event in old + new:
        record = by_id[event["id"]]
        assert {k: v for k, v in record.items() if k != "ingestTime"} == landed_form(event)
    # A batch lands its events in their order, all with the batch's ingest time; the mixed batch
    # (published last) landed its two valid events.
    gw2_ids = [r["id"] for r in records if r["gateway"] == "gw2"]
    assert gw2_ids == [e["id"] for e in new]
    for batch in good:
        assert len({by_id[e["id"]]["ingestTime"] for e in batch}) == 1
    assert sorted(r["id"] for r in read_feed(tmp_path / "live.db", limit=1000)) == sorted(by_id)

    rejected = read_records(landing / "rejected")
    whole = {r["sha256"]: r for r in rejected if "batch" not in r}
    for payload, reason in ((bomb, "batch inflates to 50000000 bytes (at most 8388608)"),
                            (garbage, "not zlib data"),
                            (oversized, f"payload of {len(oversized)} bytes (at most 200000)")):
        record = whole[hashlib.sha256(payload).hexdigest()]
        assert reason in record["reason"], record["reason"]
        assert record["bytes"] == len(payload) and record["topic"] == gw2
        assert "payloadBase64" in record          # a batch is binary: kept as base64
    alone = sorted((r for r in rejected if "batch" in r), key=lambda r: r["batch"]["index"])
    assert [r["batch"] for r in alone] == [
        {"sha256": hashlib.sha256(mixed).hexdigest(), "bytes": len(mixed), "index": i, "events": 4} for i in (1, 3)]
    assert alone[0]["reason"] == "unknown kind 'other' (event 2 of 4 of a batch)"
    assert alone[1]["reason"] == "event for gateway 'gw1' published on ew/gw2/events (event 4 of 4 of a batch)"
    assert [r["payload"].encode() for r in alone] == [encode_event(invalid), encode_event(alien)]
    assert [r["sha256"] for r in alone] == [hashlib.sha256(encode_event(e)).hexdigest() for e in (invalid, alien)]
    assert len(rejected) == 5
    counters = re.search(r"ingest stopped events=(\d+) batches=(\d+) status=\d+ acks=\d+ rejected=(\d+)",
                         ingest.log())
    assert counters is not None, ingest.log()[-2000:]
    assert tuple(map(int, counters.groups())) == (expected, len(good) + 1, 5)


@pytest.mark.slow
def test_the_spark_job_counts_batched_events_as_it_counts_single_ones(tmp_path, mqtt_broker):
    workload = make_workload(unique=400, duplicates=40, out_of_order=20, gateways=3)
    config = write_config(tmp_path, mqtt_broker)
    cloud = CloudProcess(["run", "--config", str(config)], tmp_path / "run.log")
    try:
        wait_for(lambda: "ingest connected" in cloud.log(), 60, "ingest to connect", alive=cloud)
        by_gateway: dict[str, list[dict]] = {}
        for event in workload.sequence:
            by_gateway.setdefault(event["gateway"], []).append(event)
        items = []
        for gateway, events in sorted(by_gateway.items()):
            topic = topics.events_topic(gateway)
            if gateway == "gw1":     # not upgraded: one event a message
                items += [(topic, encode_event(e), False) for e in events]
            else:
                items += [(topic, encode_batch(b), False) for b in batches(events, (32, 8, 1))]
        raw_publish(mqtt_broker, items)
        unique = len(workload.unique)
        wait_for(lambda: total_events(tmp_path / "cloud.db") >= unique, 180,
                 f"the Spark job to count {unique} events", alive=cloud)
        time.sleep(3)   # a duplicate counted twice would show now
        assert total_events(tmp_path / "cloud.db") == unique
        assert match_counts(tmp_path / "cloud.db") == workload.expected_matches()
    finally:
        assert cloud.stop() == 0
