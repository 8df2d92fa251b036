"""Device payloads through the real agent: a pushed document's mappings are subscribed to at once,
their payloads match, and hostile ones (hypothesis-generated JSON and SenML, deep nesting, huge
numbers, wrong types) are each counted under their mapping and reason, acknowledged, and never
stop the matching; a document without the mappings unsubscribes them."""
from __future__ import annotations

import json

import pytest
from agent_harness import AgentProcess, CloudWatcher, Publisher, push_config, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.mapping import PayloadRejected, compile_mappings, preset_triples
from edgewave.shared.configdoc import build_config_document

STREAM = "http://example.org/stream/building"
BASE = "http://example.org/gw1/"
HOT = """PREFIX sosa: <http://www.w3.org/ns/sosa/>
PREFIX ew: <https://edgewave.dev/ns#>
REGISTER RSTREAM <hot> AS SELECT ?sensor ?t
FROM NAMED WINDOW <w> ON <http://example.org/stream/building> [RANGE PT10S STEP PT1S]
WHERE { WINDOW <w> { ?o sosa:observedProperty ew:AirTemperature ; sosa:madeBySensor ?sensor ;
                        sosa:hasSimpleResult ?t . } FILTER(?t > 50) }"""
MAPPINGS = preset_triples("zigbee2mqtt", stream=STREAM, base_iri=BASE) + \
    preset_triples("senml", stream=STREAM, base_iri=BASE)
ROUTES = {m.name: m for m in compile_mappings(MAPPINGS)}
TOPICS = {"zigbee2mqtt": "zigbee2mqtt/hostile", "senml": "senml/hostile"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12)
wrong = st.one_of(st.text(max_size=8), st.lists(json_values, max_size=3), st.dictionaries(st.text(max_size=3),
                  json_values, max_size=3), st.none(), st.sampled_from(["NaN", "1e400", "-Infinity"]))
zigbee_hostile = st.one_of(
    st.builds(lambda v: {"temperature": v}, wrong).map(lambda v: json.dumps(v).encode()),
    st.integers(17, 400).map(lambda n: b'{"temperature": ' + b"[" * n + b"1" + b"]" * n + b"}"),
    st.integers(25, 5000).map(lambda n: b'{"temperature": ' + b"9" * n + b"}"),
    st.sampled_from([b'{"temperature": NaN}', b'{"temperature": 1e400}', b"{}", b"[]", b"not json", b"\xff\xfe"]),
)
senml_hostile = st.one_of(
    st.builds(lambda v: [{"n": "temperature", "u": "Cel", "v": v}], wrong).map(lambda v: json.dumps(v).encode()),
    st.integers(2000, 6000).map(lambda n: b"[" + b",".join([b'{"n":"temperature","v":1}'] * n) + b"]"),
    st.sampled_from([b'[{"n":"temperature","v":NaN}]', b'[{"bt":1e308,"n":"co2","v":1}]', b'{"n":"x"}',
                     b'[{"n":"temperature"}]', b"[" * 3000 + b"]" * 3000]),
)


def rejects(mapping: str, payload: bytes) -> bool:
    try:
        ROUTES[mapping].map(payload, TOPICS[mapping], 1_700_000_000_000)
    except PayloadRejected:
        return True
    return False      # e.g. {"temperature": "21.5"}: a number as text is a number to the mapping


def expected_reason(mapping: str, payload: bytes) -> str:
    """What the same compiled mapping says in process: the agent must count exactly this."""
    try:
        ROUTES[mapping].map(payload, TOPICS[mapping], 1_700_000_000_000)
    except PayloadRejected as exc:
        return exc.reason
    raise AssertionError(f"{payload[:80]!r} maps: not a hostile payload for {mapping}")


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    from broker_process import MosquittoBroker

    work = tmp_path_factory.mktemp("device-payloads")
    local, cloud_broker = MosquittoBroker(work / "local"), MosquittoBroker(work / "cloud")
    local.start()
    cloud_broker.start()
    watcher = CloudWatcher(cloud_broker)
    sensors = Publisher(local, "devices")
    cloud = Publisher(cloud_broker, "cloud-publisher")
    agent = AgentProcess(work / "agent", local, cloud_broker).start()
    push_config(cloud, 1, build_config_document({"hot": HOT}, [], [], mappings=MAPPINGS))
    assert watcher.wait_ack(1)["status"] == "applied"
    wait_for(lambda: "zigbee2mqtt/+" in agent.log() and "event=subscribed" in agent.log(), 20,
             "the agent subscribed to the mappings' topic filters")
    try:
        yield agent, watcher, sensors, cloud
    finally:
        agent.stop()
        for c in (watcher, sensors, cloud):
            c.close()
        local.kill()
        cloud_broker.kill()


class Readings:
    """Hot readings from a Zigbee2MQTT device, one after each batch of hostile payloads: each must match."""

    def __init__(self, sensors: Publisher, watcher: CloudWatcher) -> None:
        self.sensors, self.watcher, self.sent = sensors, watcher, 0

    def still_matching(self) -> None:
        self.sent += 1
        value = 60 + self.sent
        self.sensors.publish("zigbee2mqtt/kitchen", json.dumps({"temperature": value, "battery": 90}).encode())
        wait_for(lambda: any(b["variable"] == "t" and f'"{value}"' in b["value"]
                             for e in self.watcher.matches("hot") for b in e["bindings"]), 30,
                 f"the match of the hot reading {value}")


def counters(agent: AgentProcess, want: dict[str, int]) -> dict:
    """The agent's counters once they show ``want``."""
    def current() -> dict | None:
        now = agent.counters()
        return now if all(now.get(k, 0) == v for k, v in want.items()) else None
    return wait_for(current, 30, lambda: f"counters {want}; now {agent.counters()}")


def test_a_device_payload_matches_as_its_sensor(rig):
    agent, watcher, sensors, _ = rig
    sensors.publish("zigbee2mqtt/room3-temperature", b'{"temperature":63.5,"battery":78,"linkquality":139}')
    match = wait_for(lambda: next((e for e in watcher.matches("hot")
                                   if any("room3-temperature" in b["value"] for b in e["bindings"])), None),
                     30, "the match of a Zigbee2MQTT reading")
    bindings = {b["variable"]: b["value"] for b in match["bindings"]}
    assert bindings == {"sensor": f"<{BASE}sensor/room3-temperature>",
                        "t": '"63.5"^^<http://www.w3.org/2001/XMLSchema#decimal>'}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(zigbee=st.lists(zigbee_hostile.filter(lambda p: rejects("zigbee2mqtt", p)), min_size=5, max_size=12),
       senml=st.lists(senml_hostile.filter(lambda p: rejects("senml", p)), min_size=5, max_size=12))
def test_hostile_device_payloads_are_counted_by_mapping_and_reason_and_matching_goes_on(rig, zigbee, senml):
    agent, watcher, sensors, _ = rig
    readings = Readings(sensors, watcher)
    before = agent.counters()
    want: dict[str, int] = {}
    for mapping, payloads in (("zigbee2mqtt", zigbee), ("senml", senml)):
        for payload in payloads:
            key = f"payload_rejected.{mapping}.{expected_reason(mapping, payload)}"
            want[key] = want.get(key, before.get(key, 0)) + 1
            sensors.publish(TOPICS[mapping], payload)
    want["payload_rejected"] = before.get("payload_rejected", 0) + len(zigbee) + len(senml)
    readings.still_matching()
    seen = counters(agent, want)
    assert seen["decoder_error"] == 0 and seen["handler_error"] == 0
    assert agent.proc.poll() is None and "Traceback" not in agent.log()


def test_a_document_without_the_mappings_unsubscribes_their_topics(rig):
    agent, watcher, sensors, cloud = rig
    push_config(cloud, 2, build_config_document({"hot": HOT}, [], []))
    assert watcher.wait_ack(2)["status"] == "applied"
    before = agent.counters()
    wait_for(lambda: "event=unsubscribed" in agent.log(), 20, "the mappings' topic filters unsubscribed")
    sensors.publish("zigbee2mqtt/room3-temperature", b'{"temperature":70}')
    sensors.publish("ew/in/building/probe", b"<http://example.org/a> <http://example.org/b> <http://example.org/c> .\n")
    counters(agent, {"messages_in": before.get("messages_in", 0) + 1})     # only the N-Triples message came
    assert agent.counters().get("unmapped_topic", 0) == before.get("unmapped_topic", 0)
