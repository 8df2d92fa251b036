"""Test rig for the gateway agent: the real CLI in a subprocess, real brokers, a cloud-side watcher.

Used by tests/{unit,integration}/test_agent_*.py and tests/benchmarks/bench_agent.py.
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import paho.mqtt.client as mqtt
import yaml
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edgewave.shared import configdoc, topics
from edgewave.shared.landed_acks import echoable, encode_landed
from edgewave.shared.uplink_batch import decode_batch, is_batch

GATEWAY = "gw1"
KEY = "test-key-gw1"
SOSA = "http://www.w3.org/ns/sosa/"
EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"

PREFIXES = f"""PREFIX sosa: <{SOSA}>
PREFIX ex: <{EX}>
"""

FIRE = PREFIXES + """REGISTER RSTREAM <fire> AS SELECT ?room ?t ?smoke
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT60S STEP PT1S]
WHERE {
  WINDOW <w> {
    ?o1 sosa:observedProperty ex:temperature .
    ?o1 sosa:hasSimpleResult ?t .
    ?o1 sosa:madeBySensor ?ts .
    ?o2 sosa:observedProperty ex:smoke .
    ?o2 sosa:hasSimpleResult ?smoke .
    ?o2 sosa:madeBySensor ?ss .
  }
  ?ts ex:locatedIn ?room .
  ?ss ex:locatedIn ?room .
  ex:site ex:threshold ?th .
  FILTER(?t > ?th && ?smoke > 0)
}"""

INTRUSION = PREFIXES + """REGISTER RSTREAM <intrusion> AS SELECT ?room ?door ?motion
FROM NAMED WINDOW <w> ON <http://example.org/stream/security> [RANGE PT60S STEP PT1S]
WHERE {
  WINDOW <w> {
    ?e1 ex:doorOpened ?door .
    ?e2 ex:motionIn ?room .
    ?e2 ex:seenBy ?motion .
  }
  ?door ex:locatedIn ?room .
}"""

ALARM = """PREFIX ex: <http://example.org/>
REGISTER RSTREAM <alarm> AS SELECT ?e ?level ?room
FROM NAMED WINDOW <w> ON <http://example.org/stream/alarm> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?e ex:alarmLevel ?level . ?e ex:raisedBy ?sensor } ?sensor ex:locatedIn ?room }"""


AVERAGE = PREFIXES + """REGISTER RSTREAM <average> AS SELECT ?room (AVG(?t) AS ?avg) (COUNT(?o) AS ?n)
FROM NAMED WINDOW <w> ON <http://example.org/stream/fire> [RANGE PT2S STEP PT2S]
WHERE {
  WINDOW <w> { ?o sosa:observedProperty ex:temperature ; sosa:hasSimpleResult ?t ; sosa:madeBySensor ?s . }
  ?s ex:locatedIn ?room .
} GROUP BY ?room"""
"""A per-instance query: the average temperature per room, per 2 s instance (aligned at 0)."""


def alarm(n: int) -> bytes:
    """An alarm event: completes the ALARM pattern on its own (one match per message)."""
    return (f'<{EX}alarm{n}> <{EX}alarmLevel> "{n}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
            f"<{EX}alarm{n}> <{EX}raisedBy> <{EX}s1> .\n").encode()


def levels(events: list[dict]) -> list[int]:
    """The alarm numbers of ALARM match events, in arrival order."""
    out = []
    for e in events:
        value = {b["variable"]: b["value"] for b in e["bindings"]}["level"]
        out.append(int(value.split('"')[1]))
    return out


def dedup(events: list[dict]) -> list[dict]:
    """Events with duplicate ids (redeliveries) removed, first arrival kept."""
    seen, out = set(), []
    for e in events:
        if e["id"] not in seen:
            seen.add(e["id"])
            out.append(e)
    return out


STATIC = """
  ex:site ex:threshold {threshold} .
  ex:t1 ex:locatedIn ex:room1 .
  ex:s1 ex:locatedIn ex:room1 .
  ex:t2 ex:locatedIn ex:room2 .
  ex:s2 ex:locatedIn ex:room2 .
  ex:door1 ex:locatedIn ex:room1 .
"""


def config_document(version: int, patterns: dict[str, str] | None = None, threshold: int = 50,
                    significance: str = "") -> str:
    """A TriG config document with the given patterns (name -> RSP-QL)."""
    patterns = {"fire": FIRE, "intrusion": INTRUSION} if patterns is None else patterns
    blocks = " ,\n    ".join(f'[ a ew:Pattern ; ew:name "{name}" ; ew:query """{text}""" ]'
                              for name, text in patterns.items())
    pattern_part = f" ;\n    ew:pattern {blocks}" if patterns else ""
    sig_part = f" ;\n    ew:significance {significance}" if significance else ""
    return f"""@prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ew:config {{
  ex:cfg a ew:GatewayConfig ;
    ew:version {version}{pattern_part}{sig_part} .
}}
ew:schema {{
  ex:SmokeSensor rdfs:subClassOf ex:Sensor .
}}
ew:static {{{STATIC.format(threshold=threshold)}}}
"""


def observation(obs: str, sensor: str, prop: str, value: float | int) -> bytes:
    """One SOSA observation as an N-Triples message."""
    datatype = "integer" if isinstance(value, int) else "decimal"
    return (f"<{EX}{obs}> <{SOSA}madeBySensor> <{EX}{sensor}> .\n"
            f"<{EX}{obs}> <{SOSA}observedProperty> <{EX}{prop}> .\n"
            f'<{EX}{obs}> <{SOSA}hasSimpleResult> "{value}"^^<{XSD}{datatype}> .\n').encode()


def client(broker: Any, client_id: str, *, persistent: bool = False) -> mqtt.Client:
    c = mqtt.Client(callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    if getattr(broker, "username", None):
        c.username_pw_set(broker.username, broker.password)
    tls = getattr(broker, "client_tls", None)      # {"ca", "cert", "key"} for a TLS listener
    if tls:
        c.tls_set(ca_certs=tls["ca"], certfile=tls.get("cert"), keyfile=tls.get("key"))
    c.reconnect_delay_set(0.1, 0.5)
    props = None
    if persistent:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
    c.connect_async(broker.host, broker.port, keepalive=10, clean_start=not persistent, properties=props)
    return c


class Publisher:
    """A sensor-side (or cloud-side) publisher that waits for its PUBACKs."""

    def __init__(self, broker: Any, client_id: str = "test-pub") -> None:
        self.client = client(broker, client_id)
        self.connected = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p: self.connected.set()
        self.client.loop_start()
        assert self.connected.wait(15), f"publisher could not connect to {broker.host}:{broker.port}"

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False, wait: bool = True) -> None:
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        if wait and qos:
            info.wait_for_publish(timeout=15)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class CloudWatcher:
    """Collects what the agent sends to the cloud broker (persistent session: nothing missed).

    It stands in for ingest, so by default it acknowledges each events message as landed once
    it holds it (shared/landed_acks.py), as ingest does after its fsync; ``acknowledge=False``
    is a cloud from before landed acknowledgements."""

    def __init__(self, broker: Any, gateway: str = GATEWAY, client_id: str = "test-cloud-watcher",
                 *, acknowledge: bool = True) -> None:
        self.acknowledge = acknowledge
        self.events: list[dict] = []
        self.event_messages: list[tuple[int, int]] = []   # (events, payload bytes) of each message
        self.keys: list[str] = []                          # each message's key (Correlation Data)
        self.acks: list[dict] = []
        self.statuses: list[dict] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.gateway = gateway
        self.client = client(broker, client_id, persistent=True)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self.subscribed.set()
        self.client.on_message = self._on_message
        self.client.loop_start()
        assert self.subscribed.wait(15), "cloud watcher could not subscribe"

    def _on_connect(self, c, u, flags, rc, props) -> None:  # noqa: ANN001
        c.subscribe([(topics.events_topic(self.gateway), 1), (topics.config_ack_topic(self.gateway), 1),
                     (topics.status_topic(self.gateway), 1)])

    def _on_message(self, c, u, msg) -> None:  # noqa: ANN001
        if not msg.payload:
            return
        if msg.topic.endswith("/events"):
            # one JSON event, or a batch of them (shared/uplink_batch.py)
            docs = decode_batch(msg.payload) if is_batch(msg.payload) else [json.loads(msg.payload)]
            with self.lock:
                self.events.extend(docs)
                self.event_messages.append((len(docs), len(msg.payload)))
            key = echoable(getattr(msg.properties, "CorrelationData", None))
            if key is not None:
                with self.lock:
                    self.keys.append(key)
                if self.acknowledge:
                    self.land([key])
            return
        doc = json.loads(msg.payload)
        with self.lock:
            if msg.topic.endswith("/ack"):
                self.acks.append(doc)
            else:
                self.statuses.append(doc)

    def land(self, keys: list[str]) -> None:
        """Acknowledge the messages of ``keys`` as landed, as ingest does."""
        for landed in encode_landed(keys):
            self.client.publish(topics.landed_topic(self.gateway), landed, qos=1)

    def matches(self, pattern: str | None = None) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["kind"] == "match" and (pattern is None or e["pattern"] == pattern)]

    def significant(self) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["kind"] == "significant"]

    def ack_for(self, version: int | None) -> dict | None:
        with self.lock:
            found = [a for a in self.acks if a.get("version") == version]
        return found[-1] if found else None

    def wait_ack(self, version: int | None, timeout: float = 30) -> dict:
        wait_for(lambda: self.ack_for(version) is not None, timeout, f"ack for version {version}")
        ack = self.ack_for(version)
        assert ack is not None
        return ack

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str | Callable[[], str],
             interval: float = 0.05) -> Any:
    """Poll until ``predicate()`` is truthy; fail naming ``what`` (a text, or a function giving one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what() if callable(what) else what}")


def push_config(publisher: Publisher, version: int, document: str, *, key: str = KEY,
                gateway: str = GATEWAY, fmt: str = "trig") -> None:
    payload = configdoc.sign_envelope(gateway, version, document, fmt, key)
    publisher.publish(topics.config_topic(gateway), payload, retain=True)


_RUNNING: list["AgentProcess"] = []


@atexit.register
def _kill_leftovers() -> None:
    """A test that failed before its cleanup must not leave an agent running."""
    for agent in _RUNNING:
        agent.kill()


def _copy_lines(pipe: Any, path: Path) -> None:
    with pipe, open(path, "ab") as out:
        for line in iter(pipe.readline, b""):
            out.write(line)
            out.flush()


class AgentProcess:
    """``edgewave-agent run`` as a real subprocess with its own YAML, data dir and log."""

    def __init__(self, workdir: Path, local: Any, cloud: Any, overrides: dict | None = None, *,
                 command_prefix: list[str] | None = None) -> None:
        """``command_prefix``: what the command runs under (``ip netns exec NS``: on another network host)."""
        self.command_prefix = list(command_prefix or [])
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "agent.yaml"
        self.log_path = self.workdir / "agent.log"
        settings: dict[str, Any] = {
            "gateway": GATEWAY,
            "data_dir": str(self.data_dir),
            "log_level": "INFO",
            "local": {"host": local.host, "port": local.port},
            "cloud": {"host": cloud.host, "port": cloud.port},
            "reconnect": {"min_delay_s": 0.1, "max_delay_s": 1.0},
            "status": {"interval_s": 2, "local_interval_s": 0.2, "state_file_interval_s": 0.2},
            "significance": {"max_rate_per_s": 100, "max_silence_s": 3600},
            "outbox": {"resend_after_s": 3},
            "config": {"key": KEY},
        }
        for broker, name in ((local, "local"), (cloud, "cloud")):
            if getattr(broker, "username", None):
                settings[name].update(username=broker.username, password=broker.password)
            if getattr(broker, "client_tls", None):
                settings[name]["tls"] = dict(broker.client_tls)
        for section, values in (overrides or {}).items():
            if isinstance(values, dict):
                settings.setdefault(section, {}).update(values)
            else:
                settings[section] = values
        self.settings = settings
        self.config_path.write_text(yaml.safe_dump(settings))
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self, wait_subscribed: bool = True, file_size_limit: int | None = None) -> "AgentProcess":
        """Run the agent; ``file_size_limit`` (bytes, its soft RLIMIT_FSIZE) makes every file
        write beyond it fail, as on a full disk (see test_agent_outage.py). The log then
        comes through a pipe, which the limit does not touch, and a thread here copies it."""
        self._log = open(self.log_path, "ab")
        self._log_start = self.log_path.stat().st_size
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        command = [*self.command_prefix, sys.executable, "-m", "edgewave.agent.cli", "run",
                   "--config", str(self.config_path)]
        if file_size_limit is None:
            self.proc = subprocess.Popen(command, stdout=self._log, stderr=self._log, env=env)
        else:
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, hard)))
            threading.Thread(target=_copy_lines, args=(self.proc.stdout, self.log_path), daemon=True).start()
        _RUNNING.append(self)
        if wait_subscribed:
            try:
                wait_for(lambda: "link=local event=subscribed" in self.log(since_start=True) or self._dead(), 30,
                         "agent subscribed on the local broker")
                assert not self._dead(), f"agent exited early:\n{self.log()}"
            except BaseException:
                self.kill()
                raise
        return self

    def _dead(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log(self, since_start: bool = False) -> str:
        """The agent's log (all runs in this workdir, or only the current run's)."""
        if not self.log_path.exists():
            return ""
        text = self.log_path.read_bytes()
        if since_start:
            text = text[getattr(self, "_log_start", 0):]
        return text.decode(errors="replace")

    def state(self) -> dict:
        path = self.data_dir / "status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def counters(self) -> dict:
        return self.state().get("counters", {})

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "edgewave.agent.cli", *args, "--config", str(self.config_path)],
                              capture_output=True, text=True, timeout=60)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait (graceful shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: no chance to flush anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None
