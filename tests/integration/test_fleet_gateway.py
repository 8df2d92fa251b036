"""A provisioned gateway end to end: `edgewave-cloud gateway add` -> bundle -> `edgewave-agent
install --root` -> `edgewave-agent run` with the installed files, over TLS to the cloud broker
and through the gateway's own (generated) local broker."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_harness import ALARM, alarm, config_document, wait_for
from fleet_rig import (NOT_AUTHORIZED, AgentRun, Creds, FleetRig, Probe, agent_cli, install, installed_gateway,
                       running_fleet)

from edgewave.agent.config import load_settings


@pytest.fixture
def fleet(tmp_path):
    with running_fleet(tmp_path / "cloud", ("gw7",)) as rig:
        yield rig


def test_install_into_a_root_writes_what_systemd_and_the_agent_accept(fleet, tmp_path):
    root = tmp_path / "gw-root"
    result = install(fleet, "gw7", root)
    assert "would run: systemctl enable edgewave-agent" in result.stdout
    assert "would run: useradd" not in result.stdout      # --root creates no user
    etc = root / "etc/edgewave"
    for name in ("config.key", "cloud.password", "local-agent.password", "sensors.password"):
        assert (etc / name).stat().st_mode & 0o777 == 0o600, name
    for name in ("edgewave.passwd", "edgewave.acl"):
        assert (root / "etc/mosquitto" / name).stat().st_mode & 0o777 == 0o600, name
    unit = root / "etc/systemd/system/edgewave-agent.service"
    text = unit.read_text()
    assert f"--config {etc / 'agent.yaml'}" in text and f"ReadWritePaths={root / 'var/lib/edgewave-agent'}" in text
    assert shutil.which("systemd-analyze"), "systemd-analyze missing: make setup installs it (Debian: systemd)"
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert verify.returncode == 0 and verify.stderr.strip() == "", verify.stderr
    settings = load_settings(etc / "agent.yaml")             # what `edgewave-agent run` loads
    assert settings.gateway == "gw7" and settings.cloud.tls.ca == str(etc / "ca.crt")
    assert settings.config_key() == (fleet.root / "secrets/gateways/gw7/config.key").read_text().strip().encode()
    assert "password:" not in (etc / "agent.yaml").read_text()     # passwords stay in their files
    status = agent_cli("status", "--config", str(etc / "agent.yaml"), check=False)
    assert status.returncode == 1 and "has not run" in status.stderr
    # installing again (a new bundle) replaces the files and keeps the data directory
    (root / "var/lib/edgewave-agent/outbox.db").write_bytes(b"kept")
    install(fleet, "gw7", root)
    assert (root / "var/lib/edgewave-agent/outbox.db").read_bytes() == b"kept"


def test_install_refuses_a_bundle_that_is_not_one(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    subprocess.run(["tar", "czf", str(bad), "-C", "/etc", "hostname"], check=True)
    result = agent_cli("install", "--bundle", str(bad), "--root", str(tmp_path / "r"), check=False)
    assert result.returncode == 2 and "bundle" in result.stderr
    assert not (tmp_path / "r/etc/edgewave/agent.yaml").exists()


def test_install_from_flags(tmp_path):
    key = tmp_path / "k"
    key.write_text("a-key-from-elsewhere\n")
    agent_cli("install", "--root", str(tmp_path / "r"), "--gateway", "gw9", "--cloud", "cloud.example.org:8883",
              "--key-file", str(key))
    settings = load_settings(tmp_path / "r/etc/edgewave/agent.yaml")
    assert settings.cloud.host == "cloud.example.org" and settings.config_key() == b"a-key-from-elsewhere"


def test_provisioned_agent_runs_over_tls_and_the_sensors_are_confined(fleet, tmp_path):
    config, local, sensors_creds = installed_gateway(fleet, "gw7", tmp_path)
    cloud = Probe(fleet.cloud_creds(), "cloud-watcher")
    cloud.subscribe("ew/gw7/events")
    cloud.subscribe("ew/gw7/status")
    agent = AgentRun(config, tmp_path / "agent.log")
    sensors = Probe(sensors_creds, "sensors")
    try:
        wait_for(lambda: "link=cloud event=connected" in agent.log(), 30, lambda: f"a TLS connection:\n{agent.log()}")
        assert "tls=True" in agent.log()
        doc = tmp_path / "alarm.trig"
        doc.write_text(config_document(1, patterns={"alarm": ALARM}))
        push = fleet.cloud("push-config", "--gateway", "gw7", "--timeout", "30", str(doc), check=False)
        assert push.returncode == 0 and "gw7: applied version 1" in push.stdout, push.stderr + agent.log()
        assert sensors.connected
        assert sensors.publish("ew/in/alarm/s1", alarm(1)) == 0
        wait_for(lambda: cloud.received("ew/gw7/events"), 20, lambda: f"the match at the cloud:\n{agent.log()}")
        # a sensor may publish sensor input only
        assert sensors.publish("ew/gw7/config", b'{"version": 99}') == NOT_AUTHORIZED
        assert sensors.publish("ew/gw7/events", b"{}") == NOT_AUTHORIZED
        # no anonymous client on the gateway's broker either
        anon = Probe(Creds("127.0.0.1", local.port), "anon")
        assert not anon.connected
        anon.close()
    finally:
        agent.stop()
        sensors.close()
        cloud.close()
        local.kill()


@pytest.mark.parametrize("why", ["another CA", "another hostname"])
def test_agent_refuses_a_broker_the_ca_does_not_vouch_for(tmp_path, why):
    """The gateway's bundle trusts its fleet's CA for 127.0.0.1; the broker it meets has a
    certificate from another CA, or one from the right CA for another name."""
    rig = FleetRig(tmp_path / "cloud").init(gateways=("gw7",))
    if why == "another CA":
        impostor = FleetRig(tmp_path / "impostor").init()
        shutil.copy(impostor.tls_dir / "server.crt", rig.tls_dir / "server.crt")
        shutil.copy(impostor.tls_dir / "server.key", rig.tls_dir / "server.key")
    else:
        subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "tls-init", "--dir", str(rig.tls_dir),
                        "--name", "broker.example.org"], check=True, capture_output=True)
    rig.start_broker()
    config, local, _ = installed_gateway(rig, "gw7", tmp_path)
    agent = AgentRun(config, tmp_path / "agent.log")
    try:
        wait_for(lambda: agent.log().count("link=cloud event=connect_failed") >= 2, 30,
                 lambda: f"refused TLS connections:\n{agent.log()}")
        assert "CERTIFICATE_VERIFY_FAILED" in agent.log()
        assert "link=cloud event=connected" not in agent.log()
        assert agent.proc.poll() is None                   # it keeps trying, it does not crash
    finally:
        agent.stop()
        local.kill()
        rig.stop()


def test_shipped_unit_is_what_install_writes():
    from edgewave.agent.systemd_unit import render_unit

    shipped = Path(__file__).resolve().parents[2] / "configs/edgewave-agent.service"
    assert shipped.read_text() == render_unit(), "configs/edgewave-agent.service: regenerate from agent/systemd_unit.py"
