"""The shipped presets on real device payloads (tests/data/payloads/), against triples written by hand.

Also: the presets in configs/mappings/ are the package's files, a preset carries no
stream or base of its own, and the observations have the shape the demo's patterns join on.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from edgewave.agent.mapping import PRESETS, MappingError, PayloadRejected, compile_mappings, preset_path, preset_triples
from edgewave.shared.ntriples import parse

REPO = Path(__file__).resolve().parent.parent.parent
PAYLOADS = REPO / "tests" / "data" / "payloads"
BASE = "http://example.org/gw1/"
STREAM = "http://example.org/stream/building"
ARRIVAL = 1764407663123                     # 2025-11-29T09:14:23.123Z

PREFIXES = {
    "obs:": "http://example.org/gw1/obs/", "sensor:": "http://example.org/gw1/sensor/",
    "sosa:": "http://www.w3.org/ns/sosa/", "ew:": "https://edgewave.dev/ns#", "rdf:type": "rdf-type",
    "xsd:": "http://www.w3.org/2001/XMLSchema#", "unit:": "http://qudt.org/vocab/unit/",
    "qudt:": "http://qudt.org/schema/qudt/",
    "rfc:": "http://example.org/gw1/obs/urn%3Adev%3Aow%3A10e2073a0108006%3A",    # RFC 8428 5.1.3's base name
}


def nt(text: str) -> set[tuple[str, str, str]]:
    """Hand-written N-Triples with a few prefixes spelled out (``obs:x`` -> ``<http://example.org/gw1/obs/x>``)."""
    lines = []
    for line in text.strip().splitlines():
        terms = []
        for token in line.split():
            if token == "a":
                token = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
            elif "^^" in token:
                lexical, datatype = token.split("^^")
                token = f"{lexical}^^<{PREFIXES['xsd:']}{datatype[4:]}>"
            else:
                for prefix, iri in PREFIXES.items():
                    if token.startswith(prefix) and prefix.endswith(":"):
                        token = f"<{iri}{token[len(prefix):]}>"
                        break
            terms.append(token)
        lines.append(" ".join(terms) + " .")
    return set(parse("\n".join(lines)))


def route(preset: str, topic: str):
    for compiled in compile_mappings(preset_triples(preset, stream=STREAM, base_iri=BASE)):
        wanted, given = compiled.topic_filter.split("/"), topic.split("/")
        if len(wanted) == len(given) and all(w in ("+", g) for w, g in zip(wanted, given)):
            return compiled
    raise AssertionError(f"no route of {preset} for {topic}")


def mapped(preset: str, topic: str, payload: bytes, arrival: int = ARRIVAL) -> set:
    triples = route(preset, topic).map(payload, topic, arrival)
    assert len(triples) == len(set(triples))
    return set(triples)


def test_zigbee2mqtt_climate_sensor():
    payload = (PAYLOADS / "zigbee2mqtt-WSDCGQ11LM.json").read_bytes()
    assert mapped("zigbee2mqtt", "zigbee2mqtt/room3-temp", payload) == nt("""
        obs:room3-temp/1764407663123/temperature a sosa:Observation
        obs:room3-temp/1764407663123/temperature sosa:madeBySensor sensor:room3-temp
        obs:room3-temp/1764407663123/temperature sosa:observedProperty ew:AirTemperature
        obs:room3-temp/1764407663123/temperature sosa:hasSimpleResult "21.8"^^xsd:decimal
        obs:room3-temp/1764407663123/temperature sosa:resultTime "2025-11-29T09:14:23.123Z"^^xsd:dateTime
        obs:room3-temp/1764407663123/temperature ew:timeSource ew:ArrivalTime
        obs:room3-temp/1764407663123/humidity a sosa:Observation
        obs:room3-temp/1764407663123/humidity sosa:madeBySensor sensor:room3-temp
        obs:room3-temp/1764407663123/humidity sosa:observedProperty ew:RelativeHumidity
        obs:room3-temp/1764407663123/humidity sosa:hasSimpleResult "58.7"^^xsd:decimal
        obs:room3-temp/1764407663123/humidity sosa:resultTime "2025-11-29T09:14:23.123Z"^^xsd:dateTime
        obs:room3-temp/1764407663123/humidity ew:timeSource ew:ArrivalTime
    """)


def test_zigbee2mqtt_contact_false_is_an_open_door():
    payload = (PAYLOADS / "zigbee2mqtt-MCCGQ11LM.json").read_bytes()
    assert mapped("zigbee2mqtt", "zigbee2mqtt/room1-door", payload, 1000) == nt("""
        obs:room1-door/1000/contact a sosa:Observation
        obs:room1-door/1000/contact sosa:madeBySensor sensor:room1-door
        obs:room1-door/1000/contact sosa:observedProperty ew:DoorState
        obs:room1-door/1000/contact sosa:hasSimpleResult "open"
        obs:room1-door/1000/contact sosa:resultTime "1970-01-01T00:00:01.000Z"^^xsd:dateTime
        obs:room1-door/1000/contact ew:timeSource ew:ArrivalTime
    """)
    closed = mapped("zigbee2mqtt", "zigbee2mqtt/room1-door", b'{"contact": true}', 1000)
    assert nt('obs:room1-door/1000/contact sosa:hasSimpleResult "closed"') <= closed


def test_zigbee2mqtt_occupancy_is_motion_and_other_keys_are_ignored():
    payload = (PAYLOADS / "zigbee2mqtt-RTCGQ11LM.json").read_bytes()
    assert mapped("zigbee2mqtt", "zigbee2mqtt/room2-pir", payload, 1000) == nt("""
        obs:room2-pir/1000/occupancy a sosa:Observation
        obs:room2-pir/1000/occupancy sosa:madeBySensor sensor:room2-pir
        obs:room2-pir/1000/occupancy sosa:observedProperty ew:Motion
        obs:room2-pir/1000/occupancy sosa:hasSimpleResult "true"^^xsd:boolean
        obs:room2-pir/1000/occupancy sosa:resultTime "1970-01-01T00:00:01.000Z"^^xsd:dateTime
        obs:room2-pir/1000/occupancy ew:timeSource ew:ArrivalTime
    """)


@pytest.mark.parametrize("payload, reason", [
    (b'{"battery": 97, "linkquality": 120}', "no_triples"),
    (b'{"temperature": "hot"}', "wrong_type"),
    (b'{"smoke": "yes"}', "wrong_type"),
    (b'{"contact": "ajar"}', "unmapped_value"),
    (b'{"temperature": 1e999}', "not_finite"),
    (b'{"temperature": NaN}', "not_finite"),
    (b'{"temperature": 21.5', "malformed"),
    (b'\xff{}', "malformed"),
])
def test_zigbee2mqtt_refusals(payload: bytes, reason: str):
    with pytest.raises(PayloadRejected) as caught:
        route("zigbee2mqtt", "zigbee2mqtt/x").map(payload, "zigbee2mqtt/x", 1)
    assert caught.value.reason == reason


def test_a_message_is_mapped_whole_or_not_at_all():
    with pytest.raises(PayloadRejected) as caught:
        route("zigbee2mqtt", "zigbee2mqtt/x").map(b'{"temperature": 21.5, "smoke": "maybe"}', "zigbee2mqtt/x", 1)
    assert caught.value.reason == "wrong_type"


def test_tasmota_time_is_the_payloads_and_read_as_utc():
    payload = (PAYLOADS / "tasmota-AM2301.json").read_bytes()
    assert mapped("tasmota", "tele/room3-climate/SENSOR", payload, 5) == nt("""
        obs:room3-climate/5/temperature a sosa:Observation
        obs:room3-climate/5/temperature sosa:madeBySensor sensor:room3-climate
        obs:room3-climate/5/temperature sosa:observedProperty ew:AirTemperature
        obs:room3-climate/5/temperature sosa:hasSimpleResult "21.6"^^xsd:decimal
        obs:room3-climate/5/temperature sosa:resultTime "2019-11-03T19:34:34.000Z"^^xsd:dateTime
        obs:room3-climate/5/temperature ew:timeSource ew:PayloadTime
        obs:room3-climate/5/humidity a sosa:Observation
        obs:room3-climate/5/humidity sosa:madeBySensor sensor:room3-climate
        obs:room3-climate/5/humidity sosa:observedProperty ew:RelativeHumidity
        obs:room3-climate/5/humidity sosa:hasSimpleResult "58.4"^^xsd:decimal
        obs:room3-climate/5/humidity sosa:resultTime "2019-11-03T19:34:34.000Z"^^xsd:dateTime
        obs:room3-climate/5/humidity ew:timeSource ew:PayloadTime
    """)


def test_tasmota_co2_and_a_message_without_time():
    payload = (PAYLOADS / "tasmota-MHZ19B.json").read_bytes()
    assert mapped("tasmota", "tele/room2-co2/SENSOR", payload, 5) == nt("""
        obs:room2-co2/5/co2 a sosa:Observation
        obs:room2-co2/5/co2 sosa:madeBySensor sensor:room2-co2
        obs:room2-co2/5/co2 sosa:observedProperty ew:CO2Concentration
        obs:room2-co2/5/co2 sosa:hasSimpleResult "473"^^xsd:decimal
        obs:room2-co2/5/co2 sosa:resultTime "2019-11-03T19:34:34.000Z"^^xsd:dateTime
        obs:room2-co2/5/co2 ew:timeSource ew:PayloadTime
    """)
    untimed = mapped("tasmota", "tele/d/SENSOR", b'{"DHT22": {"Temperature": 2480.0}}', 5)
    assert nt("""
        obs:d/5/temperature sosa:hasSimpleResult "2480"^^xsd:decimal
        obs:d/5/temperature ew:timeSource ew:ArrivalTime
        obs:d/5/temperature sosa:resultTime "1970-01-01T00:00:00.005Z"^^xsd:dateTime
    """) <= untimed
    with pytest.raises(PayloadRejected) as caught:
        mapped("tasmota", "tele/d/SENSOR", b'{"Time": "yesterday", "DHT22": {"Temperature": 20}}')
    assert caught.value.reason == "wrong_type"


def test_esphome_text_states():
    payload = (PAYLOADS / "esphome-sensor-temperature.txt").read_bytes()
    assert mapped("esphome", "room3-node/sensor/temperature/state", payload, 7) == nt("""
        obs:room3-node/7/temperature a sosa:Observation
        obs:room3-node/7/temperature sosa:madeBySensor sensor:room3-node
        obs:room3-node/7/temperature sosa:observedProperty ew:AirTemperature
        obs:room3-node/7/temperature sosa:hasSimpleResult "21.5"^^xsd:decimal
        obs:room3-node/7/temperature sosa:resultTime "1970-01-01T00:00:00.007Z"^^xsd:dateTime
        obs:room3-node/7/temperature ew:timeSource ew:ArrivalTime
    """)
    motion = (PAYLOADS / "esphome-binary-sensor-motion.txt").read_bytes()
    assert nt('obs:n/7/motion sosa:hasSimpleResult "true"^^xsd:boolean') <= mapped(
        "esphome", "n/binary_sensor/motion/state", motion, 7)
    assert nt('obs:n/7/door sosa:hasSimpleResult "open"') <= mapped("esphome", "n/binary_sensor/door/state", b"ON", 7)
    assert nt('obs:n/7/door sosa:hasSimpleResult "closed"') <= mapped("esphome", "n/binary_sensor/door/state",
                                                                       b"OFF", 7)
    assert nt('obs:n/7/smoke sosa:hasSimpleResult "false"^^xsd:boolean') <= mapped(
        "esphome", "n/binary_sensor/smoke/state", b"OFF", 7)
    for payload, reason in ((b"nan", "not_finite"), (b"", "malformed"), (b"warm", "wrong_type")):
        with pytest.raises(PayloadRejected) as caught:
            mapped("esphome", "n/sensor/co2/state", payload)
        assert caught.value.reason == reason


def test_senml_preset_resolves_base_fields():
    pack = (b'[{"bn": "urn:dev:mac:0024befffe804ff1/", "bt": 1.7e9, "n": "temperature", "u": "Cel", "v": 21.5},'
            b' {"n": "smoke", "t": 1, "vb": true}, {"n": "door", "vs": "closed"}, {"n": "battery", "v": 97}]')
    assert mapped("senml", "senml/room3-temp", pack, 9) == nt("""
        obs:room3-temp/1700000000000/temperature a sosa:Observation
        obs:room3-temp/1700000000000/temperature sosa:madeBySensor sensor:room3-temp
        obs:room3-temp/1700000000000/temperature sosa:observedProperty ew:AirTemperature
        obs:room3-temp/1700000000000/temperature sosa:hasSimpleResult "21.5"^^xsd:decimal
        obs:room3-temp/1700000000000/temperature qudt:unit unit:DEG_C
        obs:room3-temp/1700000000000/temperature sosa:resultTime "2023-11-14T22:13:20.000Z"^^xsd:dateTime
        obs:room3-temp/1700000000000/temperature ew:timeSource ew:PayloadTime
        obs:room3-temp/1700000001000/smoke a sosa:Observation
        obs:room3-temp/1700000001000/smoke sosa:madeBySensor sensor:room3-temp
        obs:room3-temp/1700000001000/smoke sosa:observedProperty ew:Smoke
        obs:room3-temp/1700000001000/smoke sosa:hasSimpleResult "true"^^xsd:boolean
        obs:room3-temp/1700000001000/smoke sosa:resultTime "2023-11-14T22:13:21.000Z"^^xsd:dateTime
        obs:room3-temp/1700000001000/smoke ew:timeSource ew:PayloadTime
        obs:room3-temp/1700000000000/door a sosa:Observation
        obs:room3-temp/1700000000000/door sosa:madeBySensor sensor:room3-temp
        obs:room3-temp/1700000000000/door sosa:observedProperty ew:DoorState
        obs:room3-temp/1700000000000/door sosa:hasSimpleResult "closed"
        obs:room3-temp/1700000000000/door sosa:resultTime "2023-11-14T22:13:20.000Z"^^xsd:dateTime
        obs:room3-temp/1700000000000/door ew:timeSource ew:PayloadTime
    """)


def test_senml_without_time_is_timed_on_arrival_and_a_matched_record_needs_its_value():
    got = mapped("senml", "senml/d", b'[{"n": "humidity", "u": "%RH", "v": 48}]', 2000)
    assert nt("""
        obs:d/2000/humidity sosa:hasSimpleResult "48"^^xsd:decimal
        obs:d/2000/humidity qudt:unit unit:PERCENT_RH
        obs:d/2000/humidity ew:timeSource ew:ArrivalTime
        obs:d/2000/humidity sosa:resultTime "1970-01-01T00:00:02.000Z"^^xsd:dateTime
    """) <= got
    for pack, reason in ((b'[{"n": "temperature", "vs": "warm"}]', "missing_key"),
                         (b'{"n": "temperature", "v": 1}', "malformed"),
                         (b'[{"n": "temperature", "v": "1"}]', "wrong_type"),
                         (b'[{"n": "temperature", "v": 1, "x_": 2}]', "malformed"),
                         (b'[{"n": "co2", "v": 1, "u": "furlong"}]', "unmapped_value"),
                         (b'[{"n": "temperature", "bt": 1e300, "v": 1}]', "not_finite")):
        with pytest.raises(PayloadRejected) as caught:
            mapped("senml", "senml/d", pack)
        assert caught.value.reason == reason, pack


RFC_MAPPING = """
@prefix rml: <http://w3id.org/rml/> . @prefix ew: <https://edgewave.dev/ns#> .
@prefix sosa: <http://www.w3.org/ns/sosa/> . @prefix qudt: <http://qudt.org/schema/qudt/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
<#Records> a rml:TriplesMap ;
  rml:logicalSource [ rml:source [ a ew:MqttStream ; ew:topicFilter "rfc/+" ; ew:payloadFormat "senml+json" ;
                                   ew:baseIRI "http://example.org/gw1/" ] ;
                      rml:referenceFormulation rml:JSONPath ; rml:iterator "$[*]" ] ;
  rml:subjectMap [ rml:template "obs/{$.n}/{ew:resultMs}" ] ;
  rml:predicateObjectMap [ rml:predicate sosa:hasSimpleResult ;
                           rml:objectMap [ rml:reference "$.v" ; rml:datatype xsd:decimal ] ] ,
                         [ rml:predicate qudt:unit ;
                           rml:objectMap [ rml:reference "$.u" ; ew:valueTable ew:SenMLUnits ] ] ,
                         [ rml:predicate sosa:resultTime ;
                           rml:objectMap [ rml:reference "ew:resultTime" ; rml:datatype xsd:dateTime ] ] .
"""


def rfc_mapping():
    import rdflib

    graph = rdflib.Graph()
    graph.parse(data=RFC_MAPPING, format="turtle", publicID="http://example.org/mapping")
    [compiled] = compile_mappings(parse(graph.serialize(format="nt")))
    return compiled


def test_rfc8428_single_and_multiple_datapoints():
    compiled = rfc_mapping()
    single = compiled.map((PAYLOADS / "senml-rfc8428-5.1.1.json").read_bytes(), "rfc/a", 3000)
    assert set(single) == nt("""
        obs:urn%3Adev%3Aow%3A10e2073a01080063/3000 sosa:hasSimpleResult "23.1"^^xsd:decimal
        obs:urn%3Adev%3Aow%3A10e2073a01080063/3000 qudt:unit unit:DEG_C
        obs:urn%3Adev%3Aow%3A10e2073a01080063/3000 sosa:resultTime "1970-01-01T00:00:03.000Z"^^xsd:dateTime
    """)
    multiple = compiled.map((PAYLOADS / "senml-rfc8428-5.1.2.json").read_bytes(), "rfc/a", 3000)
    assert set(multiple) == nt("""
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Avoltage/3000 sosa:hasSimpleResult "120.1"^^xsd:decimal
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Avoltage/3000 qudt:unit unit:V
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Avoltage/3000 sosa:resultTime "1970-01-01T00:00:03.000Z"^^xsd:dateTime
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Acurrent/3000 sosa:hasSimpleResult "1.2"^^xsd:decimal
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Acurrent/3000 qudt:unit unit:A
        obs:urn%3Adev%3Aow%3A10e2073a01080063%3Acurrent/3000 sosa:resultTime "1970-01-01T00:00:03.000Z"^^xsd:dateTime
    """)


def test_rfc8428_base_time_and_base_unit():
    got = rfc_mapping().map((PAYLOADS / "senml-rfc8428-5.1.3.json").read_bytes(), "rfc/a", 0)
    assert set(got) == nt("""
        rfc:voltage/1276020076001 sosa:hasSimpleResult "120.1"^^xsd:decimal
        rfc:voltage/1276020076001 qudt:unit unit:V
        rfc:voltage/1276020076001 sosa:resultTime "2010-06-08T18:01:16.001Z"^^xsd:dateTime
        rfc:current/1276020071001 sosa:hasSimpleResult "1.2"^^xsd:decimal
        rfc:current/1276020071001 qudt:unit unit:A
        rfc:current/1276020071001 sosa:resultTime "2010-06-08T18:01:11.001Z"^^xsd:dateTime
        rfc:current/1276020072001 sosa:hasSimpleResult "1.3"^^xsd:decimal
        rfc:current/1276020072001 qudt:unit unit:A
        rfc:current/1276020072001 sosa:resultTime "2010-06-08T18:01:12.001Z"^^xsd:dateTime
    """)


@pytest.mark.parametrize("name", PRESETS)
def test_configs_presets_are_the_packaged_ones(name: str):
    """configs/mappings/ links to the files the package ships (one copy, read where users look)."""
    assert (REPO / "configs" / "mappings" / f"{name}.ttl").resolve() == preset_path(name).resolve()


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_names_no_stream_or_base_until_given_one(name: str):
    import rdflib

    graph = rdflib.Graph()
    graph.parse(preset_path(name), format="turtle")
    bare = parse(graph.serialize(format="nt"))
    assert not any(p.endswith(("#stream>", "#baseIRI>")) for _, p, _ in bare)
    with pytest.raises(MappingError, match="no base IRI"):
        compile_mappings(bare)
    assert all(m.stream is None for m in compile_mappings(bare, default_base_iri=BASE))
    for compiled in compile_mappings(preset_triples(name, stream=STREAM, base_iri=BASE)):
        assert compiled.stream == f"<{STREAM}>"
        assert compiled.name.startswith(name)


def test_the_demo_patterns_join_on_what_the_presets_make():
    """The sensor IRI is <base>sensor/<device>, as configs/static/site.nt names it."""
    site = (REPO / "configs" / "static" / "site.nt").read_text()
    assert "<http://example.org/gw1/sensor/room1-temperature> <https://edgewave.dev/ns#locatedIn>" in site
    got = mapped("zigbee2mqtt", "zigbee2mqtt/room1-temperature", b'{"temperature": 71}')
    assert any(p == "<http://www.w3.org/ns/sosa/madeBySensor>"
               and o == "<http://example.org/gw1/sensor/room1-temperature>" for _, p, o in got)
