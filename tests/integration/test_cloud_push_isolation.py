"""One gateway's poisoned state cannot block config pushes to the fleet (real Mosquitto, real SQLite).

gw3's registry row holds config version 2^63 - 1 (as ingest stored it before statuses were checked), and
gw6 is known but has no signing key. Pushing to all reaches every other gateway; `push-config` and the
dashboard's configuration page name gw3 and gw6 and why. Through ingest, the same hostile version (a status,
an ack for a version never pushed) no longer poisons anything.
"""
from __future__ import annotations

import html
import json
import subprocess
import sys
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import sqlite_utils
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from cloud_harness import CloudProcess, query, wait_for, write_config
from dashboard_data import HttpSession, free_port, wait_until_serving, write_dashboard_config
from edgewave.cloud.database import transaction
from edgewave.cloud.landing import read_records
from edgewave.cloud.registry import ensure_registry_schema, record_status
from edgewave.shared import topics
from edgewave.shared.configdoc import verify_envelope

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.paced]

LONG_MAX = 2 ** 63 - 1
DOCUMENT = '''@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <http://example.org/> .
ew:config {
  ex:cfg a ew:GatewayConfig ;
    ew:pattern [ a ew:Pattern ; ew:name "fire" ; ew:query """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?level
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?s } ?s ex:locatedIn ?room }""" ] .
}
'''
KEYED = ("gw1", "gw2", "gw3", "gw4")


class Gateway:
    """The agent's side of the contract: verify the signed envelope, ack it applied."""

    def __init__(self, broker, gateway: str) -> None:
        self.gateway, self.versions = gateway, []
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5,
                                  client_id=f"stand-in-{gateway}")
        subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topics.config_topic(gateway), qos=1)
        self.client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        assert subscribed.wait(10)

    def _on_message(self, client, userdata, msg) -> None:  # noqa: ANN001
        envelope = verify_envelope(msg.payload, f"key-of-{self.gateway}", self.gateway)
        self.versions.append(envelope.version)
        client.publish(topics.config_ack_topic(self.gateway), json.dumps(
            {"gateway": self.gateway, "version": envelope.version, "status": "applied", "reason": ""}), qos=1)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def push_config(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=120)


def _config(tmp_path: Path, broker, port: int | None = None) -> Path:
    extra = {}
    if port is not None:
        extra["dashboard"] = yaml.safe_load(write_dashboard_config(tmp_path, port).read_text())["dashboard"]
    return write_config(tmp_path, broker, push={"ack_timeout_s": 8},
                        gateways={gw: {"key": f"key-of-{gw}"} for gw in KEYED}, **extra)


def _known(db_path: Path) -> None:
    """gw1, gw2, gw4 healthy; gw3 poisoned by a row from before the checks; gw6 known without a key."""
    db = sqlite_utils.Database(db_path)
    ensure_registry_schema(db)
    with transaction(db) as conn:
        for gw in ("gw1", "gw2", "gw4", "gw6"):
            record_status(conn, gw, {"gateway": gw, "state": "online"}, 1000)
        conn.execute("""INSERT INTO gateways (gateway, state, config_version, last_status, first_seen_ms, last_seen_ms)
                        VALUES ('gw3', 'online', ?, ?, 1000, 1000)""",
                     (LONG_MAX, json.dumps({"state": "online", "configVersion": LONG_MAX})))
    db.close()


def test_push_to_all_reaches_every_other_gateway_and_names_the_one_that_failed(tmp_path, mqtt_broker):
    port = free_port()
    config = _config(tmp_path, mqtt_broker, port)
    db = tmp_path / "cloud.db"
    _known(db)
    (tmp_path / "fire.trig").write_text(DOCUMENT)
    gateways = {gw: Gateway(mqtt_broker, gw) for gw in KEYED}
    dashboard = None
    try:
        # push-config --all
        result = push_config(config, "--all", str(tmp_path / "fire.trig"))
        out = result.stdout
        for gw in ("gw1", "gw2", "gw4"):
            assert f"{gw}: applied version 1" in out, out + result.stderr
        assert "gw3: not pushed: gw3 reports config version 9223372036854775807" in out, out
        assert "gw6: not pushed: no key for gateway 'gw6'" in out, out
        assert result.returncode == 4, (result.returncode, out, result.stderr)
        assert {gw: g.versions for gw, g in gateways.items()} == {"gw1": [1], "gw2": [1], "gw3": [], "gw4": [1]}
        assert query(db, "SELECT gateway, version, status FROM config_pushes ORDER BY gateway") == [
            ("gw1", 1, "applied"), ("gw2", 1, "applied"), ("gw4", 1, "applied")]
        failures = query(db, "SELECT gateway, version, reason FROM push_failures ORDER BY gateway")
        assert [(gw, v) for gw, v, _ in failures] == [("gw3", None), ("gw6", None)]
        assert "9223372036854775807" in failures[0][2] and "no key" in failures[1][2]

        # The dashboard: an operator pushes to all from the configuration page.
        dashboard = CloudProcess(["dashboard", "--config", str(config)], tmp_path / "dashboard.log")
        wait_until_serving(port, dashboard)
        session = HttpSession(f"http://127.0.0.1:{port}", "alice")
        status, body = session.post("/config/push", {"csrf_token": session.csrf, "all": "1", "format": "trig",
                                                     "document": DOCUMENT})
        page = html.unescape(body.decode())
        assert status == 200, page[-2000:]
        assert "Pushing to gw1,gw2,gw4,gw5" in page, page     # gw5: a key in cloud.yaml, no gateway: times out
        assert "Not pushed to gw3: gw3 reports config version 9223372036854775807" in page
        assert "gw6: no key for gateway 'gw6'" in page
        wait_for(lambda: query(db, "SELECT gateway FROM config_pushes WHERE version = 2 AND status = 'applied' "
                                   "ORDER BY gateway") == [("gw1",), ("gw2",), ("gw4",)], 30,
                 "gw1, gw2 and gw4 to apply version 2", alive=dashboard)
        assert {gw: g.versions for gw, g in gateways.items()} == {"gw1": [1, 2], "gw2": [1, 2], "gw3": [],
                                                                  "gw4": [1, 2]}
        # The configuration table shows each gateway's own outcome: gw3's row says failed, and why.
        table = html.unescape(session.get("/config").decode())
        row = table[table.index('data-gateway="gw3"'):]
        row = row[:row.index("</tr>")]
        assert 'data-status="failed"' in row and "reports config version 9223372036854775807" in row
        row1 = table[table.index('data-gateway="gw1"'):]
        assert 'data-status="applied"' in row1[:row1.index("</tr>")]
        gw3_page = html.unescape(session.get("/gateways/gw3").decode())
        assert "failed" in gw3_page and "reports config version 9223372036854775807" in gw3_page
        # ... and the gateway page's own upload form says at once that the push to gw3 failed
        status, body = session.post("/gateways/gw3/push", {"csrf_token": session.csrf, "format": "trig",
                                                           "document": DOCUMENT})
        gw3_page = html.unescape(body.decode())
        assert status == 200 and "Not pushed: gw3 reports config version 9223372036854775807" in gw3_page, \
            gw3_page[-2000:]
        assert "Traceback" not in dashboard.log()
        wait_for(lambda: "dashboard push user=alice gateway=gw3 version=None status=failed" in dashboard.log(), 30,
                 "the push's outcomes to be logged", alive=dashboard)
    finally:
        for g in gateways.values():
            g.close()
        if dashboard is not None:
            assert dashboard.stop(timeout=20) == 0, dashboard.log()[-3000:]


def test_a_hostile_version_through_ingest_no_longer_poisons_the_push(tmp_path, mqtt_broker):
    """gw3 reports 2^63 - 1 in a status and acks 2^63 - 1 applied (never pushed): the status is quarantined,
    the ack raises nothing, and the next push to all gives every gateway a version that fits."""
    config = _config(tmp_path, mqtt_broker)
    db = tmp_path / "cloud.db"
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    gateways = {}
    try:
        wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest", alive=ingest)
        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        client.connect(mqtt_broker.host, mqtt_broker.port)
        client.loop_start()
        for gw in KEYED:
            client.publish(topics.status_topic(gw), json.dumps({"gateway": gw, "state": "online",
                                                                "configVersion": 2}), qos=1,
                           retain=True).wait_for_publish(10)
        client.publish(topics.status_topic("gw3"), json.dumps({"gateway": "gw3", "state": "online",
                                                               "configVersion": LONG_MAX}), qos=1,
                       retain=True).wait_for_publish(10)
        client.publish(topics.config_ack_topic("gw3"), json.dumps({"gateway": "gw3", "version": LONG_MAX,
                                                                   "status": "applied", "reason": ""}),
                       qos=1).wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        wait_for(lambda: query(db, "SELECT COUNT(*) FROM config_acks") == [(1,)]
                 and any("configVersion" in r["reason"] for r in read_records(tmp_path / "landing" / "rejected")),
                 30, "the ack to be recorded and the status quarantined", alive=ingest)
        assert query(db, "SELECT gateway, config_version FROM gateways ORDER BY gateway") == [
            (gw, 2) for gw in KEYED]
        gateways = {gw: Gateway(mqtt_broker, gw) for gw in KEYED}
        (tmp_path / "fire.trig").write_text(DOCUMENT)
        result = push_config(config, "--all", str(tmp_path / "fire.trig"))
        assert result.returncode == 0, result.stdout + result.stderr
        assert all(f"{gw}: applied version 3" in result.stdout for gw in KEYED), result.stdout
    finally:
        for g in gateways.values():
            g.close()
        ingest.stop()
