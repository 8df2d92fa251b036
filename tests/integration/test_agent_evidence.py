"""A match event says why it fired: the demo's fire in room 3, seen only through ACME vendor terms.

The real agent between two real brokers, with the shipped gateway config
(configs/gateway-config.trig: the building schema with the ACME vendor terms, the fire
pattern, the site's static data). ACME sensors state the sensor link from the sensor's
side (``sensor sosa:madeObservation obs``) and put the result under ``acme:value``; the
fire pattern asks for ``sosa:madeBySensor`` and ``sosa:hasSimpleResult``, so both come
from the epsilon-network, and the event must name the axioms that made them.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_harness import AgentProcess, CloudWatcher, Publisher, push_config, wait_for

from edgewave.shared.events import decode_event

REPO = Path(__file__).resolve().parents[2]
GW = "http://example.org/gw1/"
SOSA = "http://www.w3.org/ns/sosa/"
EW = "https://edgewave.dev/ns#"
ACME = "https://acme.example/ns#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBPROPERTY = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
INVERSE = "<http://www.w3.org/2002/07/owl#inverseOf>"


def acme_observation(obs: str, sensor: str, prop: str, result: str) -> list[str]:
    """An ACME sensor's message, as the simulator's ``acme`` dialect writes it."""
    return [f"<{GW}{obs}> {RDF_TYPE} <{ACME}Measurement> .",
            f"<{GW}sensor/{sensor}> <{SOSA}madeObservation> <{GW}{obs}> .",
            f"<{GW}{obs}> <{SOSA}observedProperty> <{EW}{prop}> .",
            f"<{GW}{obs}> <{ACME}value> {result} ."]


@pytest.fixture
def rig(tmp_path, mqtt_broker, mqtt_broker2):
    watcher = CloudWatcher(mqtt_broker2)
    sensors = Publisher(mqtt_broker, "sensors")
    cloud = Publisher(mqtt_broker2, "cloud-publisher")
    agent = AgentProcess(tmp_path / "agent", mqtt_broker, mqtt_broker2).start()
    yield watcher, sensors, cloud
    agent.stop()
    for c in (watcher, sensors, cloud):
        c.close()


def test_the_fire_in_room3_names_the_vendor_triples_and_the_schema_axioms_it_was_entailed_by(rig):
    watcher, sensors, cloud = rig
    push_config(cloud, 1, (REPO / "configs" / "gateway-config.trig").read_text())
    assert watcher.wait_ack(1)["status"] == "applied"

    smoke = acme_observation("obs-smoke", "room3-smoke", "Smoke", f'"true"^^<{XSD}boolean>')
    temperature = acme_observation("obs-temp", "room3-temperature", "AirTemperature", f'"61.5"^^<{XSD}decimal>')
    sensors.publish("ew/in/building/room3-smoke", "\n".join(smoke).encode())
    sensors.publish("ew/in/building/room3-temperature", "\n".join(temperature).encode())
    wait_for(lambda: watcher.matches("fire"), 20, "the fire match in room 3")

    (event,) = watcher.matches("fire")
    decoded = decode_event(json.dumps(event))          # ingest accepts it, evidence included
    assert {b["variable"]: b["value"] for b in decoded["bindings"]}["room"] == f"<{GW}room3>"
    entailed = {e["triple"]: e for e in decoded["entailed"]}

    # Every entailed triple is one of the match's contributing triples, entailed from one the
    # sensors published; the static ones (locatedIn, inBuilding, the threshold) are not marked.
    published = set(smoke + temperature)
    assert set(entailed) <= set(decoded["triples"])
    assert all(e["from"] in published for e in entailed.values())
    assert f"<{GW}sensor/room3-smoke> <{EW}locatedIn> <{GW}room3> ." in decoded["triples"]
    assert not any("locatedIn" in t or "Threshold" in t or "inBuilding" in t for t in entailed)

    made_by = entailed[f"<{GW}obs-smoke> <{SOSA}madeBySensor> <{GW}sensor/room3-smoke> ."]
    assert made_by["from"] == f"<{GW}sensor/room3-smoke> <{SOSA}madeObservation> <{GW}obs-smoke> ."
    assert made_by["axioms"] == [f"<{SOSA}madeBySensor> {INVERSE} <{SOSA}madeObservation> ."]
    result = entailed[f'<{GW}obs-temp> <{SOSA}hasSimpleResult> "61.5"^^<{XSD}decimal> .']
    assert result["from"] == f'<{GW}obs-temp> <{ACME}value> "61.5"^^<{XSD}decimal> .'
    assert result["axioms"] == [f"<{ACME}value> {SUBPROPERTY} <{SOSA}hasSimpleResult> ."]
    # Both observations' sensor links and results came through the vendor's terms: four entailed.
    assert len(entailed) == 4
