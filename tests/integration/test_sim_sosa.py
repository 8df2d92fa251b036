"""Acceptance: every observation the simulator publishes parses with rdflib and is valid SOSA.

Validation is independent of the simulator's code: rdflib parses each message (RDF-star
annotation lines, which rdflib 7 cannot read, are checked by hand: the annotated triple
must be asserted in the same message and the confidence must be a decimal in 0..1), then
OWL RL closure (owlrl) over schema + static data + messages, and each observation must
then be a sosa:Observation with exactly one sensor, observed property, feature of
interest, simple result and xsd:dateTime result time, made by a sensor of the class that
observes that property. A sample of each (observed property, firmware dialect) is checked:
from a recording, and from a real broker subscription.
"""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path

import owlrl
import paho.mqtt.client as mqtt
import rdflib
from rdflib import RDF, Literal, Namespace, URIRef

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
SCHEMA = REPO / "configs" / "schema" / "building.ttl"
STATIC = REPO / "configs" / "static" / "site.nt"
SCENARIO = REPO / "configs" / "scenarios" / "fire-room3.yaml"
SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli"]

SOSA = Namespace("http://www.w3.org/ns/sosa/")
EW = Namespace("https://edgewave.dev/ns#")
XSD = Namespace("http://www.w3.org/2001/XMLSchema#")

# What class of sensor observes each property (the domain, as an operator states it).
SENSOR_CLASS = {
    EW.AirTemperature: EW.TemperatureSensor,
    EW.RelativeHumidity: EW.HumiditySensor,
    EW.CO2Concentration: EW.CO2Sensor,
    EW.Smoke: EW.SmokeDetector,
    EW.Motion: EW.MotionSensor,
    EW.DoorState: EW.DoorContactSensor,
    EW.HeartRate: EW.HeartRateMonitor,
    EW.BreathingRate: EW.BreathingRateSensor,
    EW.OxygenSaturation: EW.PulseOximeter,
    EW.Location: EW.LocationTracker,
}
ANNOTATED = {EW.HeartRate, EW.BreathingRate, EW.OxygenSaturation}

_STAR = re.compile(r"^<< (.+) >> (<[^>]+>) (.+) \.$")


def parse_message(payload: str) -> tuple[rdflib.Graph, list[tuple[str, float]]]:
    """The plain triples of a message (rdflib) and its (annotated statement, confidence) pairs."""
    plain, annotations = [], []
    for line in payload.splitlines():
        if not line.strip():
            continue
        m = _STAR.match(line)
        if m:
            inner, predicate, obj = m.groups()
            assert predicate == f"<{EW.confidence}>", line
            value = rdflib.Graph().parse(data=f"<urn:x:s> <urn:x:p> {obj} .\n", format="nt").value(
                URIRef("urn:x:s"), URIRef("urn:x:p"))
            assert isinstance(value, Literal) and value.datatype == XSD.decimal, line
            annotations.append((inner + " .", float(value.toPython())))
        else:
            plain.append(line)
    graph = rdflib.Graph().parse(data="\n".join(plain) + "\n", format="nt")
    for statement, confidence in annotations:
        assert 0.0 <= confidence <= 1.0, statement
        quoted = rdflib.Graph().parse(data=statement + "\n", format="nt")
        assert len(quoted) == 1 and next(iter(quoted)) in graph, f"annotated triple not asserted: {statement}"
    return graph, [c for _, c in annotations]


def sample_by_kind(messages: list[tuple[str, str]]) -> dict[tuple, tuple[str, str]]:
    """First message per (observed property, set of predicates): each sensor type and dialect."""
    samples: dict[tuple, tuple[str, str]] = OrderedDict()
    for topic, payload in messages:
        predicates = frozenset(re.findall(r"^\S+ (<[^>]+>)", payload, re.M))
        prop = re.search(r"<http://www.w3.org/ns/sosa/observedProperty> (<[^>]+>)", payload).group(1)
        key = (prop, predicates)
        samples.setdefault(key, (topic, payload))
    return samples


def validate_sosa(messages: list[tuple[str, str]]) -> set[URIRef]:
    """Validate each message; returns the observed properties seen."""
    world = rdflib.Graph()
    world.parse(SCHEMA)
    world.parse(STATIC, format="nt")
    observations = []
    for topic, payload in messages:
        graph, confidences = parse_message(payload)
        subjects = {s for s in graph.subjects() if isinstance(s, URIRef) and "/obs/" in str(s)}
        assert len(subjects) == 1, f"{topic}: one observation per message, got {subjects}"
        obs = subjects.pop()
        observations.append((topic, obs, confidences))
        for triple in graph:
            world.add(triple)
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(world)
    seen = set()
    for topic, obs, confidences in observations:
        assert (obs, RDF.type, SOSA.Observation) in world, f"{topic}: {obs} is not a sosa:Observation"
        one = {}
        for prop in ("madeBySensor", "observedProperty", "hasFeatureOfInterest", "hasSimpleResult", "resultTime"):
            values = list(world.objects(obs, SOSA[prop]))
            assert len(values) == 1, f"{topic}: {obs} has {len(values)} sosa:{prop}"
            one[prop] = values[0]
        sensor, observed, feature = one["madeBySensor"], one["observedProperty"], one["hasFeatureOfInterest"]
        assert (sensor, RDF.type, SOSA.Sensor) in world, topic
        assert (observed, RDF.type, SOSA.ObservableProperty) in world, topic
        assert (feature, RDF.type, SOSA.FeatureOfInterest) in world, topic
        assert (sensor, RDF.type, SENSOR_CLASS[observed]) in world, f"{topic}: {sensor} is no {SENSOR_CLASS[observed]}"
        assert (sensor, SOSA.observes, observed) in world, topic
        assert isinstance(one["hasSimpleResult"], Literal), topic
        result_time = one["resultTime"]
        assert isinstance(result_time, Literal) and result_time.datatype == XSD.dateTime, topic
        assert isinstance(result_time.toPython(), datetime), topic
        assert (len(confidences) == 1) == (observed in ANNOTATED), f"{topic}: confidence annotations {confidences}"
        # The topic names the sensor that made the observation.
        assert topic.endswith("-" + str(sensor).rsplit("/", 1)[1]), (topic, sensor)
        seen.add(observed)
    return seen


def read_recording(path: Path) -> list[tuple[str, str]]:
    messages, topic, lines = [], None, []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# ew:message "):
            if topic:
                messages.append((topic, "\n".join(lines) + "\n"))
            topic, lines = re.search(r"topic=(\S+)", line).group(1), []
        elif line and not line.startswith("#"):
            lines.append(line.split("\t", 1)[1])
    if topic:
        messages.append((topic, "\n".join(lines) + "\n"))
    return messages


def check_coverage(samples: dict) -> None:
    properties = {URIRef(key[0][1:-1]) for key in samples}
    assert properties == set(SENSOR_CLASS), f"missing sensor types: {set(SENSOR_CLASS) - properties}"
    dialect_predicates = set().union(*(key[1] for key in samples))
    assert "<https://acme.example/ns#value>" in dialect_predicates
    assert "<https://medisense.example/ns#patient>" in dialect_predicates
    assert "<http://www.w3.org/ns/sosa/madeObservation>" in dialect_predicates


def test_recorded_observations_are_valid_sosa(tmp_path: Path) -> None:
    out = tmp_path / "fire.tsv"
    subprocess.run(SIM + ["record", "--config", str(CONFIG), "--scenario", str(SCENARIO), "--duration", "180",
                          "--out", str(out)], check=True, capture_output=True, timeout=120)
    messages = read_recording(out)
    samples = sample_by_kind(messages)
    check_coverage(samples)
    # Injected readings too (smoke alarms, fire temperatures): every message of the fire.
    fire = [(t, p) for t, p in messages if "room3-smoke" in t or "room3-temperature" in t]
    seen = validate_sosa(list(samples.values()) + fire[:8])
    assert seen == set(SENSOR_CLASS)


class Subscriber:
    """A real MQTT subscriber on ew/in/# (or ``topic``), recording (arrival time, topic, payload);
    ``messages`` keeps paho's messages themselves (raw payload, QoS, retain flag)."""

    def __init__(self, host: str, port: int, topic: str = "ew/in/#", qos: int = 0) -> None:
        self.received: list[tuple[float, str, str]] = []
        self.messages: list[mqtt.MQTTMessage] = []
        self.topic, self.qos = topic, qos
        self._subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"sim-test-{time.monotonic_ns()}")
        self.network_tid: int | None = None  # native id of paho's network thread
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda c, u, mid, rcs, p: self._subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect(host, port)
        self.client.loop_start()
        assert self._subscribed.wait(20), "subscription not acknowledged"

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        self.network_tid = threading.get_native_id()
        client.subscribe(self.topic, qos=self.qos)

    def _on_message(self, client, userdata, msg) -> None:
        self.messages.append(msg)
        self.received.append((time.monotonic(), msg.topic, msg.payload.decode("utf-8")))

    def wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def test_published_observations_are_valid_sosa_and_equal_the_recording(mqtt_broker, tmp_path: Path) -> None:
    args = ["--config", str(CONFIG), "--scenario", str(SCENARIO), "--duration", "150"]
    recording = tmp_path / "expected.tsv"
    subprocess.run(SIM + ["record", *args, "--out", str(recording)], check=True, capture_output=True, timeout=120)
    expected = read_recording(recording)

    sub = Subscriber(mqtt_broker.host, mqtt_broker.port)
    try:
        run = subprocess.run(SIM + ["run", *args, "--speed", "max",
                                    "--broker", f"{mqtt_broker.host}:{mqtt_broker.port}"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        sub.wait_for(len(expected), 30)
    finally:
        sub.close()
    received = [(topic, payload) for _, topic, payload in sub.received]
    # What went over MQTT is exactly what the recording holds: same messages, and the same
    # order per gateway (each gateway has its own connection; MQTT orders per connection).
    assert len(received) == len(expected)
    for gateway in ("gw1", "gw2"):
        mine = [m for m in received if m[0].split("/")[3].startswith(gateway + "-")]
        assert mine == [m for m in expected if m[0].split("/")[3].startswith(gateway + "-")]
        assert mine
    samples = sample_by_kind(received)
    check_coverage(samples)
    validate_sosa(list(samples.values()))
