"""One gateway's hostile status cannot take the dashboard down: real Mosquitto, real ingest, real dashboard.

Each hostile status is published on gw3's topic: ingest quarantines it with the field named, and every
page, API and export still answers 200 for the fleet and for the other gateways. A row written before the
checks existed (put straight into SQLite) is read type-checked: gw3's own page answers too.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3

import paho.mqtt.client as mqtt
import pytest
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from cloud_harness import CloudProcess, query, wait_for, write_config
from dashboard_data import HttpSession, fill_known_database, free_port, wait_until_serving, write_dashboard_config
from edgewave.agent.status import encode_status, status_document
from edgewave.cloud.landing import read_records
from edgewave.shared import topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.paced]

MB = 1024 * 1024
LONG_MAX = 2 ** 63 - 1


def good(gateway: str, version: int | None = 3) -> bytes:
    return encode_status(status_document(gateway, "online", config_version=version,
                                         counters={"messages_in": 10, "matches": 2, "forwarded": 2,
                                                   "bytes_in": 900, "bytes_forwarded": 300, "dropped": 0},
                                         outbox={"depth": 1, "bytes": 300, "oldestAgeMs": 40, "unwritten": 0,
                                                 "landedAcks": "end_to_end"}, started_ms=1, pid=42))


HOSTILE: dict[str, tuple[bytes, str]] = {
    "outbox.unwritten a string": (b'{"state": "online", "outbox": {"unwritten": "x"}}', "outbox.unwritten"),
    "counters.messages_in a string": (b'{"state": "online", "counters": {"messages_in": "abc"}}',
                                      "counters.messages_in"),
    "config version 2^63 - 1": (json.dumps({"state": "online", "configVersion": LONG_MAX}).encode(),
                                "configVersion"),
    "a counter of 20 digits": (b'{"counters": {"matches": 99999999999999999999}}', "counters.matches"),
    "a counter of 30 digits": (b'{"counters": {"matches": 123456789012345678901234567890}}', "digits"),
    "a float age": (b'{"outbox": {"oldestAgeMs": 1e308}}', "outbox.oldestAgeMs"),
    "counters a list": (b'{"counters": [1, 2, 3]}', "counters must be an object"),
    "state an object": (b'{"state": {"online": true}}', "state must be text"),
    "warnings a string": (b'{"warnings": "x"}', "warnings must be a list"),
    "another gateway's name": (b'{"gateway": "gw1", "state": "offline"}', "status for gateway 'gw1'"),
    "a megabyte of nesting": (b"[" * MB, ""),             # refused by its size or its nesting, before parsing
    "nesting within the size limit": (b'{"a":' * 20_000 + b"1" + b"}" * 20_000, "nesting"),
}

MISSING_FIELDS = [b"{}", b'{"state": "online"}', b'{"outbox": {}, "counters": {}}', b"online"]

FLEET_PAGES = ["/", "/gateways", "/gateways/table", "/config", "/api/gateways", "/api/overview",
               "/export/gateways.csv", "/api/overview?range=7d", "/overview/tables", "/api/matches", "/live",
               "/alarms", "/metrics", "/queries"]
PER_GATEWAY = ["/gateways/{gw}", "/gateways/{gw}/config", "/api/gateways/{gw}/history",
               "/export/gateways/{gw}/history.csv"]


def publish(broker, topic: str, payload: bytes) -> None:
    client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        client.publish(topic, payload, qos=1, retain=True).wait_for_publish(30)
    finally:
        client.disconnect()
        client.loop_stop()


def every_page_answers(session: HttpSession, gateways: list[str]) -> None:
    paths = FLEET_PAGES + [p.format(gw=gw) for gw in gateways for p in PER_GATEWAY]
    for path in paths:
        with session.opener.open(session.base_url + path, timeout=30) as response:
            assert response.status == 200, path
            body = response.read()
            if path.startswith("/api/"):
                json.loads(body)


@pytest.fixture
def cloud(tmp_path, mqtt_broker):
    fill_known_database(tmp_path / "cloud.db")          # aggregates and five healthy or not gateways
    port = free_port()
    dashboard = yaml.safe_load(write_dashboard_config(tmp_path, port).read_text())["dashboard"]
    config = write_config(tmp_path, mqtt_broker, dashboard=dashboard)
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    web = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
    try:
        wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest", alive=ingest)
        wait_until_serving(port, web)
        yield tmp_path, f"http://127.0.0.1:{port}", ingest, web
    finally:
        ingest.stop()
        web.stop(timeout=20)


def test_each_hostile_status_is_quarantined_and_every_page_answers(cloud, mqtt_broker):
    tmp_path, url, ingest, web = cloud
    db = tmp_path / "cloud.db"
    for gw in ("gw1", "gw2", "gw3"):
        publish(mqtt_broker, topics.status_topic(gw), good(gw))
    wait_for(lambda: len(query(db, "SELECT gateway FROM gateways WHERE gateway IN ('gw1','gw2','gw3')")) == 3,
             30, "the good statuses", alive=ingest)
    session = HttpSession(url, "victor")
    every_page_answers(session, ["gw1", "gw2", "gw3", "gw-ok"])
    rejected_dir = tmp_path / "landing" / "rejected"

    for name, (payload, reason) in HOSTILE.items():
        publish(mqtt_broker, topics.status_topic("gw3"), payload)
        digest = hashlib.sha256(payload).hexdigest()
        wait_for(lambda: any(r["sha256"] == digest for r in read_records(rejected_dir)), 30,
                 f"{name} to be quarantined", alive=ingest)
        record = next(r for r in read_records(rejected_dir) if r["sha256"] == digest)
        assert record["topic"] == "ew/gw3/status" and reason in record["reason"], (name, record["reason"])
        every_page_answers(session, ["gw1", "gw2", "gw3"])
        # gw3 keeps its last good status; the others are untouched.
        assert query(db, "SELECT state, config_version FROM gateways WHERE gateway = 'gw3'") == [("online", 3)]
    reasons = {r["reason"] for r in read_records(rejected_dir)}
    assert len(reasons) >= len(HOSTILE) - 1, reasons

    # Fields left out (an older agent, a plain-text Will) are not hostile: recorded, and every page answers.
    before = len(read_records(rejected_dir))
    for payload in MISSING_FIELDS:
        publish(mqtt_broker, topics.status_topic("gw3"), payload)
    wait_for(lambda: query(db, "SELECT state FROM gateways WHERE gateway = 'gw3'") == [("online",)]
             and query(db, "SELECT COUNT(*) FROM status_history WHERE gateway = 'gw3'")[0][0] >= 1 + len(MISSING_FIELDS),
             30, "the statuses without fields to be recorded", alive=ingest)
    assert len(read_records(rejected_dir)) == before
    every_page_answers(session, ["gw1", "gw2", "gw3"])
    api = json.loads(session.get("/api/gateways"))
    assert {g["gateway"] for g in api["gateways"]} >= {"gw1", "gw2", "gw3", "gw-ok"}
    assert "Traceback" not in web.log() and "Traceback" not in ingest.log()


def test_rows_written_before_the_checks_make_no_page_fail(cloud, mqtt_broker):
    tmp_path, url, ingest, web = cloud
    db = tmp_path / "cloud.db"
    publish(mqtt_broker, topics.status_topic("gw1"), good("gw1"))
    wait_for(lambda: query(db, "SELECT state FROM gateways WHERE gateway = 'gw1'"), 30, "gw1", alive=ingest)
    session = HttpSession(url, "alice")
    stored = [
        '{"state": "online", "outbox": {"unwritten": "x"}}',
        '{"state": "online", "counters": {"messages_in": "abc", "matches": 1e308}, "outbox": {"depth": "deep"}}',
        '{"state": "online", "counters": {"x": Infinity}, "outbox": {"oldestAgeMs": NaN}}',
        '{"counters": "lots", "outbox": [1]}',
        '{"outbox": {"oldestAgeMs": 1000000000000000000000000000000}}',
        "not json",
    ]
    for i, text in enumerate(stored):
        version = LONG_MAX if i % 2 else "seven"
        conn = sqlite3.connect(db, timeout=30)
        with conn:
            conn.execute("""INSERT INTO gateways (gateway, state, config_version, last_status, first_seen_ms, last_seen_ms)
                            VALUES ('gw3', 'online', ?, ?, 1, strftime('%s','now') * 1000)
                            ON CONFLICT (gateway) DO UPDATE SET last_status = excluded.last_status,
                                config_version = excluded.config_version""", (version, text))
            conn.execute("INSERT INTO status_history (gateway, received_ms, state, config_version, payload) "
                         "VALUES ('gw3', strftime('%s','now') * 1000, 'online', 'seven', ?)", (text,))
        conn.close()
        every_page_answers(session, ["gw1", "gw3", "gw-ok"])
    assert "Traceback" not in web.log()
