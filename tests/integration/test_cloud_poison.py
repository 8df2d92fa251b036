"""Hostile uplink payloads against the real cloud: each is quarantined, none stops ingest, nothing valid is lost."""
from __future__ import annotations

import hashlib
import json
import time

import pytest

from cloud_harness import CloudProcess, query, total_events, wait_for, write_config
from edgewave.cloud import ingest_figures
from edgewave.cloud.landing import read_records
from edgewave.shared import topics
from edgewave.shared.events import encode_event, match_event
from test_cloud_ingest import raw_publish

GATEWAY = "gw3"
ROOM = "<http://example.org/room{}>"
TRIPLE = ("<http://example.org/obs/{}>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", '"{}"')


def valid_events(first: int, count: int) -> list[dict]:
    """``count`` distinct match events of gw3, numbered from ``first``."""
    now = int(time.time() * 1000)
    out = []
    for i in range(first, first + count):
        triple = (TRIPLE[0].format(i), TRIPLE[1], TRIPLE[2].format(i))
        out.append(match_event(GATEWAY, "fire", {"room": ROOM.format(i % 7)}, now - 2000 + i, now - 1000 + i,
                               [(triple, now - 1000 + i)], now))
    return out


def hostile_payloads() -> dict[str, tuple[bytes, str]]:
    """name -> (payload, a word the rejection reason must hold)."""
    event = valid_events(10_000, 1)[0]
    statement = "<a> <b> <c> ."   # short, so the event stays under the size limit and meets the triples limit
    return {
        "deep nesting": (b"[" * 500_000 + b"]" * 500_000, "nesting depth"),
        "5,000-digit number": (encode_event({**event, "windowEnd": 0}).replace(b'"windowEnd":0', b'"windowEnd":'
                                                                                 + b"9" * 5000), "digits"),
        "lone surrogate": (json.dumps({**event, "pattern": "fire\ud800"}).encode(), "surrogate"),
        "16 MB": (b'{"pad":"' + b"x" * (16 * 1024 * 1024) + b'"}', "bytes"),
        "invalid UTF-8": (encode_event(event).replace(b'"fire"', b'"fi\xff\xfere"'), "UTF-8"),
        "100,000 triples": (json.dumps({**event, "triples": [statement] * 100_000}).encode(), "triples"),
    }


def rejected_by_sha(landing) -> dict[str, dict]:
    return {r["sha256"]: r for r in read_records(landing / "rejected")}


@pytest.mark.slow
def test_each_hostile_payload_is_quarantined_and_every_valid_event_is_counted(tmp_path, mqtt_broker):
    # 4 MiB: the 100,000-triple event (1.6 MB) must meet the triples limit, not the size limit.
    config = write_config(tmp_path, mqtt_broker, ingest={"limits": {"max_bytes": 4 * 1024 * 1024}})
    cloud = CloudProcess(["run", "--config", str(config)], tmp_path / "run.log")
    landing = tmp_path / "landing"
    topic = topics.events_topic(GATEWAY)
    hostile = hostile_payloads()
    try:
        wait_for(lambda: "ingest connected" in cloud.log(), 60, "ingest to connect", alive=cloud)
        published = 0
        for payload, _ in hostile.values():
            raw_publish(mqtt_broker, [(topic, payload, False)])
            raw_publish(mqtt_broker, [(topic, encode_event(e), False) for e in valid_events(published, 30)])
            published += 30
        wait_for(lambda: total_events(tmp_path / "cloud.db") >= published, 180,
                 f"the Spark job to count {published} events", alive=cloud)
        wait_for(lambda: len(rejected_by_sha(landing)) >= len(hostile), 30, "every rejection to land", alive=cloud)
        time.sleep(3)   # a late duplicate count or a late rejection would show now
        assert total_events(tmp_path / "cloud.db") == published
        rejected = rejected_by_sha(landing)
        for name, (payload, reason) in hostile.items():
            record = rejected.get(hashlib.sha256(payload).hexdigest())
            assert record is not None, f"{name}: not in landing/rejected"
            assert reason in record["reason"], f"{name}: reason {record['reason']!r}"
            assert record["bytes"] == len(payload) and record["topic"] == topic
            assert record["truncated"] == (len(payload) > 64 * 1024)
        assert len(rejected) == len(hostile)
        log = cloud.log()
        assert "child=ingest exited" not in log, "the ingest child must never exit"
        assert log.count("service started child=ingest") == 1
    finally:
        assert cloud.stop() == 0
    # What /metrics reports of ingest (written at its stop, if not before): each rejection under its reason.
    [worker] = ingest_figures.read_all(query(tmp_path / "cloud.db", ingest_figures.READ_SQL))
    assert worker.rejected == {ingest_figures.OVERSIZED: 1, ingest_figures.INVALID_EVENT: len(hostile) - 1}
    assert worker.counters["events"] == published and worker.counters["rejected"] == len(hostile)


def test_a_message_that_kills_ingest_twice_is_quarantined_on_its_next_delivery(tmp_path, mqtt_broker):
    """A crash no handler can catch (SIGKILL at a failpoint stands for a crash in C code)."""
    config = write_config(tmp_path, mqtt_broker)
    landing = tmp_path / "landing"
    poison = encode_event(valid_events(500, 1)[0]).replace(b'"fire"', b'"fire-KILLS-INGEST"')
    env = {"EDGEWAVE_FAILPOINT": "ingest_payload:KILLS-INGEST"}
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest-0.log", env=env)
    wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest to connect", alive=ingest)
    before = valid_events(0, 5)
    after = valid_events(100, 30)
    raw_publish(mqtt_broker, [(topics.events_topic(GATEWAY), p, False)
                              for p in [encode_event(e) for e in before] + [poison]
                              + [encode_event(e) for e in after]])
    try:
        for death in (1, 2):
            assert ingest.wait(timeout=30) == -9, "the failpoint kills ingest with SIGKILL"
            assert "failpoint ingest_payload reached" in ingest.log()
            ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / f"ingest-{death}.log", env=env)
        wait_for(lambda: len({r["id"] for r in read_records(landing / "events")}) >= 35, 60,
                 "every valid event to land", alive=ingest)
        wait_for(lambda: read_records(landing / "rejected"), 30, "the poison to be quarantined", alive=ingest)
        ids = {r["id"] for r in read_records(landing / "events")}
        assert ids == {e["id"] for e in before + after}
        [record] = read_records(landing / "rejected")
        assert "ingest died 2 times while handling this message" in record["reason"]
        assert record["payload"].encode() == poison
        assert "deaths_in_flight=1 action=retry once more" in (tmp_path / "ingest-1.log").read_text()
    finally:
        assert ingest.stop() == 0
    [worker] = ingest_figures.read_all(query(tmp_path / "cloud.db", ingest_figures.READ_SQL))
    assert worker.rejected == {ingest_figures.CRASH_SUSPECT: 1}
