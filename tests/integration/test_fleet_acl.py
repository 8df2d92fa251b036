"""The cloud broker as `edgewave-cloud broker-init` and `gateway add/remove` configure it:
real Mosquitto with its dynamic-security plugin (users, client ids, roles), TLS."""
from __future__ import annotations

import base64
import json
import sqlite3
import time

import pytest
from cloud_harness import CloudProcess, wait_for
from cloud_workload import make_workload
from fleet_rig import NOT_AUTHORIZED, Creds, FleetRig, Probe, cloud_cli, running_fleet

from edgewave.shared.events import encode_event
from edgewave.cloud.broker_access import password_fields
from edgewave.shared.mosquitto_files import MAX_PACKET_BYTES

pytestmark = pytest.mark.paced


@pytest.fixture
def fleet(tmp_path):
    with running_fleet(tmp_path / "cloud", ("gwA", "gwB")) as rig:
        yield rig


def _probes(*probes: Probe) -> None:
    for probe in probes:
        probe.close()


def test_generated_files_hold_hashes_and_no_secret_in_clear(fleet):
    users = {c["username"]: c for c in json.loads((fleet.root / "broker/dynamic-security.json").read_text())["clients"]}
    assert set(users) == {"edgewave-admin", "edgewave-cloud", "gwA", "gwB"}
    password = fleet.secret("gateways", "gwA", "broker.password")
    salt = base64.b64decode(users["gwA"]["salt"])
    assert users["gwA"]["password"] == password_fields(password, salt=salt)["password"]
    assert users["gwA"]["clientid"] == "edgewave-gwA-cloud" and "clientid" not in users["edgewave-cloud"]
    text = (fleet.root / "broker/dynamic-security.json").read_text()
    assert password not in text and fleet.secret("cloud-broker.password") not in text
    for path in (fleet.root / "broker/dynamic-security.json", fleet.root / "secrets/broker-admin.password",
                 fleet.root / "secrets/gateways/gwA/config.key", fleet.bundle("gwA"), fleet.tls_dir / "ca.key"):
        assert path.stat().st_mode & 0o777 == 0o600, path
    conf = (fleet.root / "broker/mosquitto.conf").read_text()
    assert "allow_anonymous false" in conf and "allow_anonymous true" not in conf
    assert "mosquitto_dynamic_security.so" in conf and "password_file" not in conf


def test_anonymous_and_wrong_password_are_refused(fleet):
    anon = Probe(Creds("127.0.0.1", fleet.plain_port), "anon")
    anon_tls = Probe(Creds("127.0.0.1", fleet.tls_port, client_tls={"ca": str(fleet.tls_dir / "ca.crt")}), "anon-tls")
    wrong = Probe(Creds("127.0.0.1", fleet.tls_port, "gwA", "not-the-password",
                        {"ca": str(fleet.tls_dir / "ca.crt")}), "wrong")
    try:
        for probe in (anon, anon_tls, wrong):
            assert not probe.connected, probe.connect_rc
            assert probe.connect_rc is not None and probe.connect_rc.is_failure
    finally:
        _probes(anon, anon_tls, wrong)


def test_a_gateway_reaches_only_its_own_topics(fleet):
    cloud = Probe(fleet.cloud_creds(), "cloud")
    gw_a = fleet.gateway_probe("gwA")
    gw_b = fleet.gateway_probe("gwB")
    try:
        assert cloud.connected and gw_a.connected and gw_b.connected
        assert cloud.subscribe("ew/+/events") <= 2
        assert cloud.subscribe("ew/+/status") <= 2
        assert cloud.publish("ew/gwB/config", b'{"for": "gwB"}', retain=True) < 0x80   # 0x10: no subscribers yet
        assert gw_b.subscribe("ew/gwB/config") <= 2

        # gwA cannot speak for gwB, nor read what is meant for gwB
        assert gw_a.publish("ew/gwB/events", b'{"fake": true}') == NOT_AUTHORIZED
        assert gw_a.publish("ew/gwB/status", b'{"state": "offline"}', retain=True) == NOT_AUTHORIZED
        assert gw_a.publish("ew/gwA/config", b'{"self-signed": true}', retain=True) == NOT_AUTHORIZED
        assert gw_a.publish("ew/gwB/config/ack", b"{}") == NOT_AUTHORIZED
        # nor subscribe to it (ew/gwB/config holds a retained document, which gwB gets and gwA does not)
        for topic in ("ew/gwB/config", "ew/+/events", "ew/gwB/events/landed", "ew/#", "#"):
            assert gw_a.subscribe(topic) == NOT_AUTHORIZED, topic
        # nor acknowledge gwB's events as landed (which would make gwB delete them)
        assert gw_a.publish("ew/gwB/events/landed", b'{"landed": []}') == NOT_AUTHORIZED
        assert gw_b.subscribe("ew/gwB/events/landed") <= 2
        # ... and its own topics work
        assert gw_a.publish("ew/gwA/events", b'{"real": true}') == 0
        assert gw_a.subscribe("ew/gwA/config") <= 2
        assert gw_a.subscribe("ew/gwA/events/landed") <= 2
        assert cloud.publish("ew/gwB/events/landed", b'{"landed": ["b"]}') < 0x80
        assert cloud.publish("ew/gwA/events/landed", b'{"landed": ["a"]}') < 0x80
        time.sleep(0.5)
        assert cloud.received("ew/gwA/events") == [b'{"real": true}']
        assert cloud.received("ew/gwB/events") == []
        assert gw_a.received("ew/gwB/config") == [] and gw_a.received("ew/gwB/events/landed") == []
        assert [topic for topic, _ in gw_a.messages] == ["ew/gwA/events/landed"]
        assert gw_b.received("ew/gwB/config") == [b'{"for": "gwB"}']
        assert gw_b.received("ew/gwB/events/landed") == [b'{"landed": ["b"]}']
    finally:
        _probes(cloud, gw_a, gw_b)


def test_the_broker_refuses_a_packet_larger_than_any_edgewave_payload(fleet):
    """Mosquitto's own limit is 256 MB: the generated configuration bounds every packet
    before the agent, ingest or the dashboard hold it."""
    cloud = Probe(fleet.cloud_creds(), "cloud")
    gw_a = fleet.gateway_probe("gwA")
    try:
        assert cloud.subscribe("ew/+/events") <= 2
        largest = b"x" * (MAX_PACKET_BYTES - 1024)             # a 1 MiB batch, and room to spare
        assert gw_a.publish("ew/gwA/events", largest) == 0
        gw_a.client.publish("ew/gwA/events", b"y" * (MAX_PACKET_BYTES + 1), qos=1)
        assert gw_a.disconnected.wait(10)                      # the broker closed the connection
        time.sleep(0.5)
        assert cloud.received("ew/gwA/events") == [largest]
    finally:
        _probes(cloud, gw_a)
    assert f"max_packet_size {MAX_PACKET_BYTES}" in fleet.bundle_file("gwA", "local-broker/edgewave.conf").decode()


def test_ingest_receives_every_event_of_every_gateway(fleet, tmp_path):
    for gateway in ("gw1", "gw2", "gw3"):
        fleet.cloud("gateway", "add", gateway)
    workload = make_workload(unique=300, duplicates=0, out_of_order=0, gateways=3)
    ingest = CloudProcess(["ingest", "--config", str(fleet.config)], tmp_path / "ingest.log")
    publishers = {gw: fleet.gateway_probe(gw) for gw in ("gw1", "gw2", "gw3")}
    try:
        # Subscribed: with no subscriber the broker drops an event (PUBACK 16, no matching subscribers).
        wait_for(lambda: "ingest connected" in ingest.log(), 60, "ingest connected and subscribing", alive=ingest)
        for event in workload.sequence:
            assert publishers[event["gateway"]].publish(f"ew/{event['gateway']}/events", encode_event(event)) == 0
        expected = {e["id"] for e in workload.unique}
        deadline = time.monotonic() + 30
        landed: set[str] = set()
        while time.monotonic() < deadline and landed != expected:
            landed = {json.loads(line)["id"] for f in (fleet.root / "landing/events").rglob("*.jsonl")
                      for line in f.read_text().splitlines()}
            time.sleep(0.5)
        assert landed == expected, f"{len(landed)} of {len(expected)} landed; ingest log:\n{ingest.log()[-2000:]}"
    finally:
        _probes(*publishers.values())
        ingest.stop()


def test_remove_revokes_a_connected_gateway(fleet):
    creds = fleet.gateway_creds("gwB")
    gw_b = fleet.gateway_probe("gwB")
    gw_a = fleet.gateway_probe("gwA")
    try:
        assert gw_b.connected and gw_a.connected, (f"gwB: {gw_b.connect_rc} {gw_b.connect_error}; "
                                                   f"gwA: {gw_a.connect_rc} {gw_a.connect_error}")
        result = fleet.cloud("gateway", "remove", "gwB")
        assert "revoked" in result.stdout
        assert "gwB" not in fleet.broker_clients()
        assert not (fleet.root / "secrets/gateways/gwB").exists() and not fleet.bundle("gwB").exists()
        # the broker drops the connection of a client whose user is deleted ...
        assert gw_b.disconnected.wait(10), "the revoked gateway's connection was not dropped"
        assert not gw_a.disconnected.is_set(), "revoking gwB disconnected gwA"
    finally:
        _probes(gw_b, gw_a)
    # ... and refuses it from then on
    again = Probe(creds, "edgewave-gwB-cloud")
    try:
        assert not again.connected and again.connect_rc is not None and again.connect_rc.is_failure
    finally:
        again.close()
    still = fleet.gateway_probe("gwA")
    try:
        assert still.connected
    finally:
        still.close()
    listing = fleet.cloud("gateway", "list").stdout
    assert "gwA" in listing and "gwB" not in listing


def test_refused_requests_exit_2_and_say_why(fleet):
    for args, why in ((("gateway", "add", "gwA"), "already provisioned"),
                      (("gateway", "add", "gw/x"), "invalid gateway id"),
                      (("gateway", "add", "edgewave-cloud"), "cloud's own broker users"),
                      (("gateway", "add", "edgewave-admin"), "cloud's own broker users"),
                      (("gateway", "remove", "nobody"), "not provisioned"),
                      (("gateway", "rotate-key", "nobody"), "not provisioned")):
        result = fleet.cloud(*args, check=False)
        assert result.returncode == 2 and why in result.stderr, (args, result.stderr)


def test_mutual_tls_needs_a_client_certificate(tmp_path):
    rig = FleetRig(tmp_path / "mtls", require_client_certificate=True).init()
    rig.cloud("gateway", "add", "gw7", "--client-cert")
    rig.start_broker()
    gw_dir = tmp_path / "gw7-files"
    gw_dir.mkdir()
    for name in ("client.crt", "client.key"):
        (gw_dir / name).write_bytes(rig.bundle_file("gw7", name))
    creds = rig.gateway_creds("gw7")
    without = Probe(creds, "edgewave-gw7-cloud")
    creds.client_tls = {"ca": str(rig.tls_dir / "ca.crt"), "cert": str(gw_dir / "client.crt"),
                        "key": str(gw_dir / "client.key")}
    with_cert = Probe(creds, "edgewave-gw7-cloud")
    try:
        assert not without.connected
        assert with_cert.connected
        assert with_cert.publish("ew/gw7/events", b"{}") < 0x80
    finally:
        _probes(without, with_cert)
        rig.stop()


def test_tls_init_keeps_an_existing_ca(tmp_path):
    cloud_cli("tls-init", "--dir", str(tmp_path / "tls"), "--name", "broker.example.org")
    first = (tmp_path / "tls/ca.crt").read_bytes()
    cloud_cli("tls-init", "--dir", str(tmp_path / "tls"), "--name", "broker.example.org", "--name", "10.0.0.5")
    assert (tmp_path / "tls/ca.crt").read_bytes() == first
    assert (tmp_path / "tls/server.key").stat().st_mode & 0o777 == 0o600


def test_a_gateway_id_with_a_final_newline_is_refused_and_an_old_one_blocks_nothing(fleet):
    """``$`` matched before a final newline, so `gateway add $'gw9\\n'` was accepted and then broke
    every later add and remove. Now it is refused before anything is written; one recorded by an
    older version gets no broker access, and the fleet goes on being provisioned and revoked."""
    refused = fleet.cloud("gateway", "add", "gw9\n", check=False)
    assert refused.returncode != 0 and "invalid gateway id" in refused.stderr
    conn = sqlite3.connect(fleet.root / "cloud.db")
    conn.execute("INSERT INTO fleet_gateways (gateway, added_ms, removed_ms, key_id, previous_key_id, "
                 "overlap_until_ms, client_cert) VALUES (?, 0, NULL, 'k', NULL, NULL, 0)", ("gw8\n",))
    conn.commit()
    conn.close()
    fleet.cloud("gateway", "add", "gwC")
    fleet.cloud("gateway", "remove", "gwB")
    assert set(fleet.broker_clients()) == {"edgewave-admin", "edgewave-cloud", "gwA", "gwC"}
