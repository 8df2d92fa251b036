"""The simulator over TLS with credentials, against a real Mosquitto that allows nothing else:
the broker keys every tier shares (``tls``, ``username``, ``password_file``) in sim.yaml, and
the same on the command line."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker_process import MosquittoBroker
from edgewave.cloud.pki import init_broker_tls
from edgewave.shared.broker import BrokerSettings, TlsSettings
from edgewave.shared.mqtt_client import new_client

SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli"]
PASSWORD = "tls-sensor-pw"


@pytest.fixture
def tls_broker(tmp_path: Path):
    """A broker with one TLS listener, refusing anonymous clients; its CA in ``.ca``."""
    tls = init_broker_tls(tmp_path / "tls", ["localhost", "127.0.0.1"])
    broker = MosquittoBroker(tmp_path / "broker", username="sensors", password=PASSWORD)
    with broker.config_path.open("a") as conf:
        conf.write(f"cafile {tls['ca']}\ncertfile {tls['cert']}\nkeyfile {tls['key']}\n")
    broker.ca = tls["ca"]
    broker.start()
    yield broker
    broker.kill()


class Receiver:
    """Counts what arrives on ew/in/#, connected with the shared client factory over TLS."""

    def __init__(self, broker: BrokerSettings) -> None:
        self.count = 0
        self.subscribed = threading.Event()
        self.client = new_client(broker, f"tls-receiver-{time.monotonic_ns()}")
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe("ew/in/#", qos=1)
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        assert self.subscribed.wait(20), "subscription over TLS not acknowledged"

    def _on_message(self, client, userdata, msg) -> None:
        self.count += 1

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _settings(broker: MosquittoBroker, password_file: Path) -> BrokerSettings:
    return BrokerSettings(host="127.0.0.1", port=broker.port, username="sensors", password_file=str(password_file),
                          tls=TlsSettings(ca=str(broker.ca)))


def test_run_publishes_over_tls_with_the_config_files_credentials(tls_broker, tmp_path: Path) -> None:
    password_file = tmp_path / "sensors.password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    config = tmp_path / "sim.yaml"
    config.write_text(f"duration_s: 20\ngateways: [{{id: gw1}}]\n"
                      f"broker: {{host: 127.0.0.1, port: {tls_broker.port}, qos: 1, username: sensors,\n"
                      f"         password_file: {password_file}, tls: {{ca: {tls_broker.ca}}}}}\n")
    receiver = Receiver(_settings(tls_broker, password_file))
    try:
        run = subprocess.run(SIM + ["run", "--config", str(config), "--speed", "max"], capture_output=True,
                             text=True, timeout=120)
        deadline = time.monotonic() + 10
        sent = int(run.stderr.split("run_done")[1].split("sent=")[1].split()[0]) if "run_done" in run.stderr else 0
        while receiver.count < sent and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        receiver.close()
    assert run.returncode == 0, run.stderr
    assert "dropped=0" in run.stderr.split("run_done")[1]
    assert sent > 50 and receiver.count == sent


def test_replay_takes_tls_and_credentials_on_the_command_line(tls_broker, tmp_path: Path) -> None:
    password_file = tmp_path / "sensors.password"
    password_file.write_text(PASSWORD)
    recording = tmp_path / "run.tsv"
    subprocess.run(SIM + ["record", "--gateway", "gw1", "--duration", "30", "--out", str(recording)], check=True,
                   capture_output=True, timeout=120)
    receiver = Receiver(_settings(tls_broker, password_file))
    address = f"127.0.0.1:{tls_broker.port}"
    try:
        replay = subprocess.run(SIM + ["replay", str(recording), "--speed", "max", "--qos", "1", "--broker", address,
                                       "--username", "sensors", "--password-file", str(password_file),
                                       "--tls-ca", str(tls_broker.ca)], capture_output=True, text=True, timeout=120)
        sent = int(replay.stderr.split("replay_done")[1].split("sent=")[1].split()[0])
        deadline = time.monotonic() + 10
        while receiver.count < sent and time.monotonic() < deadline:
            time.sleep(0.05)
        # A CA that did not sign the broker's certificate: the handshake fails, the replay cannot start.
        other_ca = init_broker_tls(tmp_path / "other", ["localhost"])["ca"]
        untrusted = subprocess.run(SIM + ["replay", str(recording), "--speed", "max", "--broker", address,
                                          "--username", "sensors", "--password-file", str(password_file),
                                          "--tls-ca", str(other_ca)], capture_output=True, text=True, timeout=120)
    finally:
        receiver.close()
    assert replay.returncode == 0, replay.stderr
    assert sent > 10 and receiver.count == sent
    assert untrusted.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
