"""Credentials and TLS (CA, client certificate) towards the brokers, from the agent's YAML."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from agent_harness import ALARM, AgentProcess, CloudWatcher, Publisher, alarm, config_document, push_config, wait_for
from broker_process import MosquittoBroker


def test_agent_authenticates_on_the_local_broker(tmp_path, mqtt_broker_auth, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    sensors = Publisher(mqtt_broker_auth, "sensors")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker_auth, mqtt_broker2).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        watcher.wait_ack(1)
        sensors.publish("ew/in/alarm/s1", alarm(1))
        wait_for(lambda: watcher.matches("alarm"), 20, "a match through the authenticated broker")
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()


def test_wrong_password_is_logged_and_retried_not_fatal(tmp_path, mqtt_broker_auth, mqtt_broker2):
    agent = AgentProcess(tmp_path / "agent", mqtt_broker_auth, mqtt_broker2,
                         {"local": {"username": "edge", "password": "wrong"}}).start(wait_subscribed=False)
    try:
        wait_for(lambda: agent.log().count("link=local event=refused") >= 2, 30, "two refused connects")
        assert agent.proc.poll() is None
        wait_for(lambda: "link=cloud event=connected" in agent.log(), 20, "the cloud link unaffected")
    finally:
        agent.stop()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(workdir: Path) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    workdir.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "1", "-subj", "/CN=edgewave-test-ca", cwd=workdir)
    for name, cn in (("server", "127.0.0.1"), ("client", "gw1")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={cn}", cwd=workdir)
        (workdir / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1\n" if name == "server" else
                                             "extendedKeyUsage=clientAuth\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext", cwd=workdir)
    return {n: workdir / n for n in ("ca.crt", "server.crt", "server.key", "client.crt", "client.key")}


class TlsBroker(MosquittoBroker):
    """Mosquitto with a TLS listener that requires a client certificate signed by the test CA."""

    def __init__(self, workdir: Path, certs: dict[str, Path]) -> None:
        self.certs = certs
        super().__init__(workdir)
        self.client_tls = {"ca": str(certs["ca.crt"]), "cert": str(certs["client.crt"]),
                           "key": str(certs["client.key"])}

    def _write_config(self) -> None:
        super()._write_config()
        with self.config_path.open("a") as f:
            f.write(f"cafile {self.certs['ca.crt']}\ncertfile {self.certs['server.crt']}\n"
                    f"keyfile {self.certs['server.key']}\nrequire_certificate true\n")


@pytest.fixture
def tls_cloud(tmp_path):
    certs = _certificates(tmp_path / "pki")     # openssl: make setup installs it
    broker = TlsBroker(tmp_path / "tls-broker", certs).start()
    yield broker
    broker.kill()


def test_agent_uses_tls_with_client_certificate_to_the_cloud(tmp_path, mqtt_broker, tls_cloud):
    watcher = CloudWatcher(tls_cloud)
    cloud = Publisher(tls_cloud, "cloud-publisher")
    sensors = Publisher(mqtt_broker, "sensors")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, tls_cloud).start()
    try:
        push_config(cloud, 1, config_document(1, patterns={"alarm": ALARM}))
        assert watcher.wait_ack(1)["status"] == "applied"
        sensors.publish("ew/in/alarm/s1", alarm(1))
        wait_for(lambda: watcher.matches("alarm"), 20, "a match over TLS")
        assert "link=cloud event=connecting" in agent.log() and "tls=True" in agent.log()
    finally:
        agent.stop()
        for c in (watcher, cloud, sensors):
            c.close()
