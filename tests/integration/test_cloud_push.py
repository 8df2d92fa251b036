"""`edgewave-cloud push-config` against the real gateway agent (and, contract-level, a minimal responder)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
import yaml
from paho.mqtt.enums import CallbackAPIVersion

from cloud_harness import CloudProcess, query, retained_config, wait_for, write_config
from edgewave.shared import topics
from edgewave.shared.configdoc import ConfigRejected, load_config_document, verify_envelope

FIRE = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <fire> AS SELECT ?room ?level
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?s } ?s ex:locatedIn ?room }"""


def document(pattern: str = FIRE, threshold: int = 50) -> str:
    return f'''@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <http://example.org/> .
ew:config {{
  ex:cfg a ew:GatewayConfig ;
    ew:pattern [ a ew:Pattern ; ew:name "fire" ; ew:query """{pattern}""" ] .
}}
ew:static {{
  ex:site ex:threshold {threshold} .
  ex:s1 ex:locatedIn ex:room1 .
}}
'''


def push(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgewave.cloud.cli", "push-config", "--config", str(config),
                           *args], capture_output=True, text=True, timeout=timeout)


def write_doc(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class Agent:
    """The real `edgewave-agent run` for gateway gw1, its cloud side on ``cloud``."""

    def __init__(self, tmp_path: Path, local, cloud, key: str = "key-of-gw1") -> None:
        self.log_path = tmp_path / "agent.log"
        config = tmp_path / "agent.yaml"
        config.write_text(yaml.safe_dump({
            "gateway": "gw1", "data_dir": str(tmp_path / "agent-data"), "log_level": "INFO",
            "local": {"host": local.host, "port": local.port}, "cloud": {"host": cloud.host, "port": cloud.port},
            "reconnect": {"min_delay_s": 0.1, "max_delay_s": 1.0}, "status": {"interval_s": 2},
            "config": {"key": key},
        }))
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "edgewave.agent.cli", "run", "--config", str(config)],
                                     stdout=self._log, stderr=self._log, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        wait_for(lambda: "link=cloud event=subscribed" in self.log() or self.proc.poll() is not None, 60,
                 "the agent to subscribe on the cloud broker")
        assert self.proc.poll() is None, self.log()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture
def agent_rig(tmp_path, mqtt_broker, mqtt_broker2):
    """(cloud.yaml, cloud broker, agent): the agent's local broker is mqtt_broker2."""
    if not Path(sys.executable).with_name("edgewave-agent").exists():
        pytest.fail("edgewave-agent is not installed in this environment")
    config = write_config(tmp_path, mqtt_broker)
    agent = Agent(tmp_path, mqtt_broker2, mqtt_broker)
    yield config, mqtt_broker, agent
    agent.stop()


def test_push_to_running_agent_prints_applied_with_the_new_version(tmp_path, agent_rig):
    config, broker, agent = agent_rig
    doc = write_doc(tmp_path, "fire.trig", document())
    first = push(config, "--gateway", "gw1", str(doc))
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.strip() == "gw1: applied version 1"
    # A document saved by an editor that starts files with a byte-order mark goes out without it.
    bom = tmp_path / "fire2.trig"
    bom.write_bytes(b"\xef\xbb\xbf" + document(threshold=60).encode("utf-8"))
    second = push(config, "--gateway", "gw1", str(bom))
    assert second.returncode == 0 and second.stdout.strip() == "gw1: applied version 2", second.stderr
    db = tmp_path / "cloud.db"
    assert query(db, "SELECT gateway, version, status FROM config_pushes ORDER BY version") == [
        ("gw1", 1, "applied"), ("gw1", 2, "applied")]
    assert query(db, "SELECT version, status FROM config_acks ORDER BY version") == [(1, "applied"), (2, "applied")]
    # The signed envelope stays retained for a gateway that reconnects later.
    envelope = verify_envelope(retained_config(broker, "gw1"), "key-of-gw1", "gw1")
    assert envelope.version == 2 and "ex:threshold 60" in envelope.document
    assert not envelope.document.startswith("\ufeff")


def test_document_the_agent_rejects_prints_the_agents_reason(tmp_path, agent_rig):
    config, broker, agent = agent_rig
    # Valid RSP-QL, but on a stream this agent does not map: only the agent can know.
    elsewhere = FIRE.replace("http://example.org/stream/fire", "http://elsewhere.org/stream")
    result = push(config, "--gateway", "gw1", str(write_doc(tmp_path, "x.trig", document(elsewhere))))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("gw1: rejected version 1: ") and "unknown stream" in result.stdout
    assert query(tmp_path / "cloud.db", "SELECT status, reason FROM config_pushes")[0][0] == "rejected"


def test_wrong_key_is_rejected_by_the_agent_with_bad_signature(tmp_path, mqtt_broker, mqtt_broker2):
    config = write_config(tmp_path, mqtt_broker, gateways={"gw1": {"key": "not-the-agents-key"}})
    agent = Agent(tmp_path, mqtt_broker2, mqtt_broker)
    try:
        result = push(config, "--gateway", "gw1", str(write_doc(tmp_path, "f.trig", document())))
    finally:
        agent.stop()
    assert result.returncode == 1 and "bad signature" in result.stdout, result.stdout + result.stderr


def test_bad_document_is_refused_before_publishing(tmp_path, mqtt_broker):
    config = write_config(tmp_path, mqtt_broker)
    broken = FIRE.replace("?e ex:raisedBy ?s }", "?e ex:raisedBy }")
    result = push(config, "--gateway", "gw1", str(write_doc(tmp_path, "bad.trig", document(broken))))
    assert result.returncode == 2
    assert "refused, nothing published" in result.stderr
    assert "parse error in pattern fire at line 4 column" in result.stderr, result.stderr
    not_rdf = push(config, "--gateway", "gw1", str(write_doc(tmp_path, "bad2.trig", "ew:config { oops")))
    assert not_rdf.returncode == 2 and "parse error" in not_rdf.stderr, not_rdf.stderr
    assert retained_config(mqtt_broker, "gw1") is None
    assert query(tmp_path / "cloud.db", "SELECT COUNT(*) FROM config_pushes") in ([], [(0,)])


# -- contract level: a minimal responder that plays the agent's side of the ack contract -----------------


class AckResponder:
    """Contract-level stand-in for an agent: verifies the envelope, acks applied/rejected like the agent."""

    def __init__(self, broker, gateway: str, key: str) -> None:
        self.gateway, self.key, self.applied = gateway, key, 0
        self.client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5,
                                  client_id=f"responder-{gateway}")
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topics.config_topic(gateway), qos=1)
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()

    def _on_message(self, client, userdata, msg) -> None:  # noqa: ANN001
        version, status, reason = None, "applied", ""
        try:
            env = verify_envelope(msg.payload, self.key, self.gateway)
            version = env.version
            if env.version <= self.applied:
                raise ConfigRejected(f"stale version {env.version} <= applied {self.applied}")
            load_config_document(env.document, env.format)
            self.applied = env.version
        except ConfigRejected as exc:
            status, reason = "rejected", exc.reason
        client.publish(topics.config_ack_topic(self.gateway), json.dumps(
            {"gateway": self.gateway, "version": version, "status": status, "reason": reason}), qos=1)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_contract_push_all_known_gateways_and_timeout(tmp_path, mqtt_broker):
    """Contract-level (no real agent): --all reaches every gateway ingest has seen; a silent one times out."""
    config = write_config(tmp_path, mqtt_broker, push={"ack_timeout_s": 4})
    ingest = CloudProcess(["ingest", "--config", str(config)], tmp_path / "ingest.log")
    responders = [AckResponder(mqtt_broker, gw, f"key-of-{gw}") for gw in ("gw1", "gw2")]
    try:
        wait_for(lambda: "ingest connected" in ingest.log(), 30, "ingest", alive=ingest)
        client = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        client.connect(mqtt_broker.host, mqtt_broker.port)
        client.loop_start()
        for gw, version in (("gw1", 4), ("gw2", None), ("gw3", None)):
            client.publish(topics.status_topic(gw), json.dumps({"state": "online", "configVersion": version}),
                           qos=1, retain=True).wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        wait_for(lambda: len(query(tmp_path / "cloud.db", "SELECT gateway FROM gateways")) == 3, 30,
                 "ingest to record three gateways", alive=ingest)
        responders[0].applied = 4
        result = push(config, "--all", str(write_doc(tmp_path, "f.trig", document())))
        # gw1 reported version 4, so it gets 5; gw3 has no agent and times out.
        assert "gw1: applied version 5" in result.stdout and "gw2: applied version 1" in result.stdout
        assert "gw3: no ack for version 1: timed out after 4s" in result.stdout
        assert result.returncode == 3
        # A late agent for gw3 applies the retained config; ingest records its ack and resolves the push.
        responders.append(AckResponder(mqtt_broker, "gw3", "key-of-gw3"))
        wait_for(lambda: query(tmp_path / "cloud.db", "SELECT status FROM config_pushes WHERE gateway = 'gw3'")
                 == [("applied",)], 30, "ingest to resolve the timed-out push", alive=ingest)
    finally:
        for r in responders:
            r.close()
        ingest.stop()
