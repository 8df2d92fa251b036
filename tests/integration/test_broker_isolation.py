"""No gateway can disturb another on the cloud broker: two provisioned gateways, real Mosquitto
with the dynamic-security configuration broker-init writes, real ingest.

gw1 holds its own valid credentials and tries what an attacker with them would: join
ingest's shared subscription (and so take a share of every gateway's events, which the
broker would then refuse to deliver to it: lost), take over ingest's session or gw2's by
connecting with their client ids, subscribe to what is not its own, and change the broker's
users through the control topic. Meanwhile gw2 sends 100 events; every one must land.
"""
from __future__ import annotations

import json
import time

import pytest
from cloud_harness import CloudProcess
from cloud_workload import make_workload
from fleet_rig import NOT_AUTHORIZED, FleetRig, Probe, running_fleet

from edgewave.shared.events import encode_event


@pytest.fixture
def fleet(tmp_path):
    with running_fleet(tmp_path / "cloud", ("gw1", "gw2")) as rig:
        yield rig


def _landed_ids(rig: FleetRig) -> set[str]:
    return {json.loads(line)["id"] for f in (rig.root / "landing/events").rglob("*.jsonl")
            for line in f.read_text().splitlines()}


def _wait_landed(rig: FleetRig, expected: set[str], timeout_s: float = 60) -> set[str]:
    deadline = time.monotonic() + timeout_s
    landed = _landed_ids(rig)
    while time.monotonic() < deadline and not expected <= landed:
        time.sleep(0.5)
        landed = _landed_ids(rig)
    return landed


def _connects(rig: FleetRig, gateway: str) -> bool:
    """Whether ``gateway`` connects with its own credentials and client id."""
    probe = rig.gateway_probe(gateway)
    try:
        return probe.connected
    finally:
        probe.close()


def _ingest_subscribed(ingest: CloudProcess) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "ingest connected" not in ingest.log():
        time.sleep(0.2)
    time.sleep(1.0)       # its SUBSCRIBE follows the CONNACK


def test_one_gateway_cannot_take_events_sessions_or_users_from_another(fleet, tmp_path):
    events = [e for e in make_workload(unique=200, duplicates=0, out_of_order=0, gateways=2).sequence
              if e["gateway"] == "gw2"]
    assert len(events) == 100
    ingest = CloudProcess(["ingest", "--config", str(fleet.config)], tmp_path / "ingest.log")
    gw1 = fleet.gateway_probe("gw1")
    gw2 = fleet.gateway_probe("gw2")
    attempts: list[Probe] = []
    try:
        _ingest_subscribed(ingest)
        assert gw1.connected and gw2.connected
        users_before = fleet.broker_clients()

        # ingest's share group (and any other), the other gateways' events, everything
        for topic in ("$share/edgewave-ingest/ew/+/events", "$share/edgewave-ingest/ew/gw2/events",
                      "$share/g/ew/+/events", "ew/+/events", "ew/gw2/events", "ew/gw2/config",
                      "ew/gw2/events/landed", "ew/+/status", "#", "$SYS/#",
                      "$CONTROL/dynamic-security/v1/response"):
            assert gw1.subscribe(topic) == NOT_AUTHORIZED, topic
        # the broker's users: gw1 may not add one for itself, nor delete gw2
        command = {"commands": [{"command": "createClient", "username": "gw1-admin", "password": "x",
                                 "roles": [{"rolename": "edgewave-cloud"}]},
                                {"command": "deleteClient", "username": "gw2"}]}
        assert gw1.publish("$CONTROL/dynamic-security/v1", json.dumps(command).encode()) == NOT_AUTHORIZED

        # gw2 sends its events while gw1 tries to take sessions with gw1's own password
        half = len(events) // 2
        for event in events[:half]:
            assert gw2.publish("ew/gw2/events", encode_event(event)) == 0
        for client_id in ("edgewave-cloud-ingest", "edgewave-cloud-ingest-1", "edgewave-cloud-push-0123456789ab",
                          "edgewave-gw2-cloud", "gw2", "edgewave-cloud", ""):
            probe = Probe(fleet.gateway_creds("gw1"), client_id)
            attempts.append(probe)
            assert not probe.connected and probe.connect_rc is not None and probe.connect_rc.is_failure, client_id
        for event in events[half:]:
            assert gw2.publish("ew/gw2/events", encode_event(event)) == 0

        landed = _wait_landed(fleet, {e["id"] for e in events})
        assert {e["id"] for e in events} <= landed, \
            f"{len({e['id'] for e in events} - landed)} of gw2's 100 events did not land:\n{ingest.log()[-2000:]}"
        assert not gw2.disconnected.is_set(), "gw2 was knocked off"
        assert ingest.log().count("ingest connected") == 1, f"ingest lost its connection:\n{ingest.log()[-2000:]}"
        assert fleet.broker_clients() == users_before
    finally:
        for probe in (gw1, gw2, *attempts):
            probe.close()
        ingest.stop()


def test_an_existing_fleet_upgrades_with_broker_init_and_one_restart(tmp_path):
    """A fleet provisioned before dynamic security: its cloud.yaml names a password file and an
    ACL file, its broker runs on them, its gateways hold bundles without a client id. broker-init
    (run while that broker runs) writes the new configuration and says the broker must be
    restarted; after the restart every gateway connects with the password it already has."""
    rig = FleetRig(tmp_path / "cloud", extra={"fleet": {"password_file": str(tmp_path / "cloud/broker/passwd"),
                                                        "acl_file": str(tmp_path / "cloud/broker/acl")}})
    rig.init(gateways=("gw1",))
    old = rig.start_legacy_broker()
    try:
        before = rig.gateway_probe("gw1", client_id="any-id-went")
        assert before.connected, "the legacy broker should accept gw1 with any client id"
        before.close()
        result = rig.cloud("broker-init")
        assert "restart it on" in result.stdout, result.stdout
        assert "fleet.password_file" in result.stderr and "fleet.acl_file" in result.stderr   # told to remove them
    finally:
        old.kill()
    rig.start_broker()
    try:
        gw1 = rig.gateway_probe("gw1")     # the password from the bundle gw1 installed long ago
        try:
            assert gw1.connected
            assert gw1.publish("ew/gw1/events", b"{}") < 0x80     # 0x10: accepted, nobody subscribed
            assert gw1.subscribe("$share/edgewave-ingest/ew/+/events") == NOT_AUTHORIZED
        finally:
            gw1.close()
        rig.cloud("gateway", "add", "gw2")      # the running broker, changed through its control topic
        assert set(rig.broker_clients()) == {"edgewave-admin", "edgewave-cloud", "gw1", "gw2"}
        assert _connects(rig, "gw2")
    finally:
        rig.stop()


def test_gateway_add_while_the_broker_is_down_takes_effect_when_it_starts(tmp_path):
    rig = FleetRig(tmp_path / "cloud").init(gateways=("gw1",))
    result = rig.cloud("gateway", "add", "gw2")
    assert "provisioned" in result.stdout and "reads the file when it starts" in result.stderr
    rig.start_broker()
    try:
        assert _connects(rig, "gw2")
    finally:
        rig.stop()


def test_broker_init_brings_a_running_broker_back_to_what_the_registry_says(fleet):
    """Someone changed the broker by hand: gw1's role lost its events topic and another client
    holds gw1's role. broker-init again puts it right, without disconnecting a gateway whose
    access did not change."""
    bystander = fleet.gateway_probe("gw2")
    with fleet.admin() as admin:
        admin.run([{"command": "removeRoleACL", "rolename": "edgewave-gateway-gw1",
                    "acltype": "publishClientSend", "topic": "ew/gw1/events"},
                   {"command": "createClient", "username": "gw1-copy", "password": "x",
                    "roles": [{"rolename": "edgewave-gateway-gw1"}]}])
    gw1 = fleet.gateway_probe("gw1")
    try:
        assert gw1.publish("ew/gw1/events", b"{}") == NOT_AUTHORIZED
        result = fleet.cloud("broker-init")
        assert "brought up to date on the running broker" in result.stdout, result.stdout
    finally:
        gw1.close()
    gw1 = fleet.gateway_probe("gw1")
    try:
        assert gw1.publish("ew/gw1/events", b"{}") < 0x80
        assert "gw1-copy" not in fleet.broker_clients()
        assert not bystander.disconnected.is_set(), "gw2's access did not change; it should stay connected"
    finally:
        gw1.close()
        bystander.close()


def test_a_bundle_names_the_client_id_the_broker_binds(fleet):
    import yaml

    agent_yaml = yaml.safe_load(fleet.bundle_file("gw1", "agent.yaml"))
    assert agent_yaml["cloud"]["client_id"] == "edgewave-gw1-cloud"
    assert fleet.broker_clients()["gw1"] == {"clientid": "edgewave-gw1-cloud", "roles": ["edgewave-gateway-gw1"]}

