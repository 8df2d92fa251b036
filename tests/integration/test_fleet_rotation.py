"""`edgewave-cloud gateway rotate-key`: the cloud signs with the new key at once; the agent,
given the rotation bundle, accepts either key during the overlap, switches to the new one on
the first document signed with it (and says so in its ack and status), and refuses the old
key after the switch or once the overlap has ended."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import yaml
from agent_harness import ALARM, config_document, wait_for
from fleet_rig import (AgentRun, FleetRig, Probe, cloud_cli, install, installed_gateway, point_at_local_broker,
                       running_fleet)

from edgewave.agent.keyring import Keyring
from edgewave.agent.config import settings_from_dict
from edgewave.shared.config_keys import format_time, key_id

pytestmark = pytest.mark.paced


@pytest.fixture
def fleet(tmp_path):
    with running_fleet(tmp_path / "cloud", ("gw7",)) as rig:
        yield rig


class Gateway:
    """The installed gw7: its agent, its local broker, and the cloud's view of its acks."""

    def __init__(self, rig: FleetRig, tmp_path: Path) -> None:
        self.rig, self.tmp = rig, tmp_path
        self.config, self.local, _ = installed_gateway(rig, "gw7", tmp_path)
        self.root = tmp_path / "gw7-root"
        self.cloud = Probe(rig.cloud_creds(), "test-cloud")
        self.cloud.subscribe("ew/gw7/config/ack")
        self.cloud.subscribe("ew/gw7/status")
        self.agent = AgentRun(self.config, tmp_path / "agent.log")
        self.pushes = 0
        self.wait_connected()

    def wait_connected(self) -> None:
        wait_for(lambda: "link=cloud event=subscribed" in self.agent.log(), 30,
                 lambda: f"the agent's cloud link:\n{self.agent.log()}")

    def reinstall_and_restart(self) -> None:
        """What the operator does with the rotation bundle: install it, restart the agent."""
        self.agent.stop()
        install(self.rig, "gw7", self.root)
        point_at_local_broker(self.config, self.local.port)
        self.agent = AgentRun(self.config, self.tmp / "agent.log")
        self.wait_connected()

    def ack(self, version: int) -> dict:
        def found() -> dict | None:
            acks = [json.loads(p) for p in self.cloud.received("ew/gw7/config/ack")]
            matching = [a for a in acks if a["version"] == version]
            return matching[-1] if matching else None
        return wait_for(found, 30, lambda: f"the ack of version {version}:\n{self.agent.log()}")

    def push(self, old_key: str | None = None) -> dict:
        """`edgewave-cloud push-config` of a new version; signed with the key the cloud holds, or
        with ``old_key`` (a cloud.yaml naming it, as a sender still holding the old key would)."""
        config = self.rig.config
        if old_key is not None:
            (self.tmp / "old.key").write_text(old_key + "\n")
            settings = yaml.safe_load(config.read_text())
            settings["gateways"] = {"gw7": {"key_file": str(self.tmp / "old.key")}}
            config = self.tmp / "cloud-old-key.yaml"
            config.write_text(yaml.safe_dump(settings))
        self.pushes += 1
        doc = self.tmp / f"doc{self.pushes}.trig"
        doc.write_text(config_document(self.pushes, patterns={"alarm": ALARM}))
        result = cloud_cli("push-config", "--config", str(config), "--gateway", "gw7", "--timeout", "30", str(doc),
                           check=False)
        found = re.search(r"gw7: (?:applied|rejected) version (\d+)", result.stdout)
        assert found, f"{result.stdout}{result.stderr}{self.agent.log()}"
        return self.ack(int(found.group(1)))

    def status(self) -> dict:
        return json.loads(self.cloud.received("ew/gw7/status")[-1])

    def close(self) -> None:
        self.agent.stop()
        self.cloud.close()
        self.local.kill()


def test_rotation_switches_on_the_first_document_signed_with_the_new_key(fleet, tmp_path):
    gateway = Gateway(fleet, tmp_path)
    try:
        old = fleet.secret("gateways", "gw7", "config.key")
        assert gateway.push()["status"] == "applied"

        result = fleet.cloud("gateway", "rotate-key", "gw7", "--overlap-hours", "24")
        new = fleet.secret("gateways", "gw7", "config.key")
        assert new != old and key_id(new) in result.stdout and old not in result.stdout
        assert fleet.bundle_file("gw7", "config.key").decode().strip() == old
        assert fleet.bundle_file("gw7", "config.next.key").decode().strip() == new
        gateway.reinstall_and_restart()
        assert (gateway.root / "etc/edgewave/config.next.key").stat().st_mode & 0o777 == 0o600

        # during the overlap, before the switch: the old key still verifies
        ack = gateway.push(old)
        assert ack["status"] == "applied" and ack["keyId"] == key_id(old)
        # the cloud now signs with the new key: applied, and the agent switches to it
        ack = gateway.push()
        assert ack["status"] == "applied" and ack["keyId"] == key_id(new), ack
        assert "event=key_switched" in gateway.agent.log()
        wait_for(lambda: gateway.status().get("configKey", {}).get("switched"), 10, "the switch in the status")
        assert gateway.status()["configKey"]["keyId"] == key_id(new)
        # after the switch the old key is refused, even within the overlap ...
        ack = gateway.push(old)
        assert ack["status"] == "rejected" and ack["reason"] == "bad signature"
        # ... also after a restart (the switch is remembered in the data directory)
        gateway.agent.stop()
        gateway.agent = AgentRun(gateway.config, tmp_path / "agent.log")
        gateway.wait_connected()
        assert gateway.push(old)["status"] == "rejected"
        assert gateway.push()["status"] == "applied"
        assert old not in gateway.agent.log() and new not in gateway.agent.log()     # keys are never logged
    finally:
        gateway.close()


def test_the_old_key_is_refused_once_the_overlap_has_ended(fleet, tmp_path):
    gateway = Gateway(fleet, tmp_path)
    try:
        old = fleet.secret("gateways", "gw7", "config.key")
        assert gateway.push()["status"] == "applied"
        overlap_s = 25
        fleet.cloud("gateway", "rotate-key", "gw7", "--overlap-hours", str(overlap_s / 3600))
        rotated = time.time()
        gateway.reinstall_and_restart()
        ack = gateway.push(old)
        assert time.time() < rotated + overlap_s, "the machine was too slow to test within the overlap"
        assert ack["status"] == "applied"
        time.sleep(max(0.0, rotated + overlap_s + 1 - time.time()))
        ack = gateway.push(old)           # no new-key document seen: the overlap alone ends it
        assert ack["status"] == "rejected" and ack["reason"] == "bad signature"
        assert gateway.push()["status"] == "applied"
        # a bundle written after the overlap holds only the new key
        fleet.cloud("gateway", "bundle", "gw7")
        assert fleet.bundle_file("gw7", "config.key").decode().strip() == fleet.secret("gateways", "gw7", "config.key")
    finally:
        gateway.close()


def test_keyring_without_rotation_and_with_a_bad_overlap_time(tmp_path):
    (tmp_path / "k").write_text("current\n")
    (tmp_path / "n").write_text("next\n")
    plain = Keyring(settings_from_dict({"data_dir": str(tmp_path), "config": {"key_file": str(tmp_path / "k")}}))
    assert plain.accepted() == [b"current"] and plain.describe() == {"keyId": key_id("current")}
    rotating = Keyring(settings_from_dict({"data_dir": str(tmp_path), "config": {
        "key_file": str(tmp_path / "k"), "next_key_file": str(tmp_path / "n"),
        "key_overlap_until": format_time(time.time() + 60)}}))
    assert rotating.accepted() == [b"current", b"next"]
    assert rotating.accepted(now=time.time() + 61) == [b"next"]
    with pytest.raises(ValueError, match="key_overlap_until"):
        Keyring(settings_from_dict({"data_dir": str(tmp_path), "config": {
            "key_file": str(tmp_path / "k"), "next_key_file": str(tmp_path / "n"), "key_overlap_until": "soon"}}))
