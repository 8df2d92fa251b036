"""Hostile payloads through every preset and a generic mapping: only PayloadRejected (with a reason
from REASONS and a detail) ever comes out, and a rejection is never the catch-all for a bug.

Also the compile-time refusals: every construct outside the subset is a MappingError naming it.
"""
from __future__ import annotations

import json
import re

import pytest
import rdflib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.mapping import (PRESETS, REASONS, MappingError, PayloadLimits, PayloadRejected, compile_mappings,
                                    preset_triples)
from edgewave.shared.ntriples import parse, parse_line, serialize

ROUTES = [m for name in PRESETS for m in compile_mappings(
    preset_triples(name, stream="http://example.org/s", base_iri="http://example.org/gw1/"))]

GENERIC = """
@prefix rml: <http://w3id.org/rml/> . @prefix ew: <https://edgewave.dev/ns#> . @prefix ex: <http://example.org/> .
<http://example.org/m#All> a rml:TriplesMap ;
  rml:logicalSource [ rml:source [ a ew:MqttStream ; ew:topicFilter "any/#" ; ew:payloadFormat "%s" ] ;
                      rml:iterator "%s" ] ;
  rml:subjectMap [ rml:template "http://example.org/{ew:topic[1]}/{$.id}" ] ;
  rml:predicateObjectMap [ rml:predicate ex:v ; rml:objectMap [ rml:reference "$.v" ] ] ,
                         [ rml:predicate ex:u ;
                           rml:objectMap [ rml:template "u/{$.v}/{$.w}" ; rml:termType rml:Literal ] ] .
"""


def compile_text(text: str, **options):
    graph = rdflib.Graph()
    graph.parse(data=text, format="turtle")
    return compile_mappings(parse(graph.serialize(format="nt")), **options)


ROUTES += compile_text(GENERIC % ("json", "$..x".replace("..", "[*].")), limits=PayloadLimits(max_triples=64))
ROUTES += compile_text(GENERIC % ("senml+json", "$[*]"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(
        st.sampled_from(["temperature", "humidity", "co2", "smoke", "occupancy", "contact", "Time", "AM2301",
                         "Temperature", "n", "v", "vb", "vs", "bn", "bt", "t", "u", "bv", "name", "id", "w", "x_"])
        | st.text(max_size=5), children, max_size=6),
    max_leaves=30)


def hostile_bytes():
    return st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
        st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(1, 5000).map(lambda n: b'{"temperature":' * n + b"1" + b"}" * n),
        st.integers(20, 5000).map(lambda n: b'{"temperature": ' + b"9" * n + b"}"),
        st.integers(1, 20000).map(lambda n: b"[" + b",".join([b'{"n":"temperature","v":1}'] * n) + b"]"),
        st.sampled_from([b"NaN", b"Infinity", b'{"temperature": -Infinity}', b'{"temperature": 1e400}',
                         b'"\\ud800"', b'{"temperature": "\\udfff"}', b"\x00", b"ON\x00", b"\xef\xbb\xbf{}",
                         b'[{"n":"smoke","vb":1}]', b'[{"bt":1e308,"n":"co2","v":1}]',
                         b'[{"n":"co2","v":1e308,"bv":1e308}]']),
    )


def check(route, payload: bytes, topic: str) -> None:
    try:
        triples = route.map(payload, topic, 1_700_000_000_000)
    except PayloadRejected as exc:
        assert exc.reason in REASONS
        assert exc.detail and not exc.detail.startswith("decoder error"), exc.detail
        return
    assert triples and len(triples) <= route.limits.max_triples
    for triple in triples:                      # every triple is canonical N-Triples
        assert parse_line(serialize(triple)) == triple


TOPICS = ["zigbee2mqtt/dev", "tele/dev/SENSOR", "n/sensor/temperature/state", "senml/dev", "any/a/b", "x"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=hostile_bytes(), topic=st.sampled_from(TOPICS))
def test_hostile_payloads_raise_only_the_rejection(payload: bytes, topic: str):
    for route in ROUTES:
        check(route, payload, topic)


@pytest.mark.parametrize("payload, reason", [
    (b"[" * 100 + b"]" * 100, "too_deep"),
    (b"x" * 20000, "oversized"),
    (b"[" + b",".join([b"1"] * 2000) + b"]", "too_many_entries"),
    (b'{"temperature": ' + b"1" * 30 + b"}", "not_finite"),
])
def test_limits_are_checked_before_parsing(payload: bytes, reason: str):
    route = next(r for r in ROUTES if r.name == "zigbee2mqtt")
    with pytest.raises(PayloadRejected) as caught:
        route.map(payload, "zigbee2mqtt/d", 0)
    assert caught.value.reason == reason


def test_many_values_in_a_template_are_bounded():
    text = mapping(subject='[ rml:template "s/{$.a[*]}/{$.b[*]}" ]')
    [route] = compile_text(text, limits=PayloadLimits(max_triples=50))
    payload = json.dumps({"a": list(range(30)), "b": list(range(30))}).encode()
    with pytest.raises(PayloadRejected) as caught:
        route.map(payload, "any/a", 0)
    assert caught.value.reason == "too_many_triples"


HEADER = """@prefix rml: <http://w3id.org/rml/> . @prefix ew: <https://edgewave.dev/ns#> .
@prefix ex: <http://example.org/> . @prefix rr: <http://www.w3.org/ns/r2rml#> .
@prefix oldrml: <http://semweb.mmlab.be/ns/rml#> . @prefix ql: <http://semweb.mmlab.be/ns/ql#> .
"""
SOURCE = '[ a ew:MqttStream ; ew:topicFilter "t/+" ; ew:baseIRI "http://example.org/" ]'


def mapping(logical: str = f'rml:source {SOURCE} ; rml:iterator "$"', subject: str = '[ rml:template "s/{$.a}" ]',
            pom: str = '[ rml:predicate ex:p ; rml:objectMap [ rml:reference "$.b" ] ]') -> str:
    return HEADER + f"ex:TM a rml:TriplesMap ; rml:logicalSource [ {logical} ] ; rml:subjectMap {subject} ; " \
                    f"rml:predicateObjectMap {pom} ."


@pytest.mark.parametrize("text, named", [
    (mapping(logical='rml:source [ a rml:RelativePathSource ; rml:path "x.json" ]'), "RelativePathSource"),
    (mapping(logical=f'rml:source {SOURCE} ; rml:referenceFormulation rml:CSV'), "referenceFormulation"),
    (mapping(logical=f'rml:source {SOURCE} ; rml:iterator "$..a"'), "recursive descent"),
    (mapping(logical=f'rml:source {SOURCE} ; rml:iterator "$[1:3]"'), "slices"),
    (mapping(logical=f'rml:source {SOURCE} ; rml:iterator "$[?(@.a > 1)]"'), "filters"),
    (mapping(subject='[ rml:template "s/{{a}}" ]'), "inside a reference"),
    (mapping(subject='[ rml:template "s/{a" ]'), "never closed"),
    (mapping(subject='[ rml:template "s/{N\\\\ame}" ]'), "may only escape"),
    (mapping(subject='[ rml:reference "$.a" ; rml:termType rml:Literal ]'), "cannot be a literal"),
    (mapping(subject='[ rml:template "s/{$.a}" ; rml:graphMap [ rml:constant ex:g ] ]'), "named graphs"),
    (mapping(pom='[ rml:predicate ex:p ; rml:objectMap [ rml:parentTriplesMap ex:TM ] ]'), "parentTriplesMap"),
    (mapping(pom='[ rml:predicate ex:p ; rml:objectMap [ rml:reference "$.b" ; rml:language "a-english" ] ]'),
     "language tag"),
    (mapping(pom='[ rml:predicate ex:p ; rml:objectMap [ rml:reference "$.b" ; rml:datatypeMap '
                 '[ rml:template "x{$.t}" ] ] ]'), "constant-valued"),
    (mapping(pom='[ rml:predicate ex:p ; rml:objectMap [ rml:reference "$.b" ; rml:functionExecution ex:f ] ]'),
     "functionExecution"),
    (mapping(pom='[ rml:predicate ex:p ; rml:objectMap [ rml:reference "ew:nonsense" ] ]'), "edgewave reference"),
    (mapping(logical=f'rml:source {SOURCE[:-1]} ; ew:payloadFormat "senml+xml" ]'), "senml+xml"),
    (mapping(logical=f'rml:source {SOURCE[:-1]} ; ew:topicFilter "a/#/b" ]'), "more than one"),
    (HEADER + 'ex:TM a rml:TriplesMap ; rml:logicalSource [ rml:source ' + SOURCE + ' ] .', "exactly one subject"),
    (HEADER + "ex:x ex:y ex:z .", "no rml:TriplesMap"),
])
def test_outside_the_subset_is_a_mapping_error_naming_it(text: str, named: str):
    with pytest.raises(MappingError, match=re.escape(named)):
        compile_text(text)


def test_relative_templates_need_a_base():
    text = mapping(logical='rml:source [ a ew:MqttStream ; ew:topicFilter "t/+" ] ; rml:iterator "$"')
    with pytest.raises(MappingError, match="no base IRI"):
        compile_text(text)
    [route] = compile_text(text, default_base_iri="http://example.org/gw9/")
    assert route.map(b'{"a": "x y", "b": 1}', "t/d", 0) == (
        ("<http://example.org/gw9/s/x%20y>", "<http://example.org/p>",
         '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'),)


def test_the_older_rml_namespaces_are_read_too():
    text = HEADER + f"""ex:TM rml:logicalSource [ oldrml:source {SOURCE} ; oldrml:referenceFormulation ql:JSONPath ;
        oldrml:iterator "$.items[*]" ] ;
      rr:subjectMap [ rr:template "http://example.org/i/{{id}}" ; rr:class ex:Item ] ;
      rr:predicateObjectMap [ rr:predicate ex:name ; rr:objectMap [ oldrml:reference "name" ; rr:language "en" ] ] .
    """
    [route] = compile_text(text)
    assert set(route.map(b'{"items": [{"id": 1, "name": "a"}]}', "t/x", 0)) == {
        ("<http://example.org/i/1>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", "<http://example.org/Item>"),
        ("<http://example.org/i/1>", "<http://example.org/name>", '"a"@en')}


def test_triples_maps_sharing_a_source_run_together():
    text = HEADER + """
      ex:src a ew:MqttStream ; ew:topicFilter "t/+" ; ew:baseIRI "http://example.org/" ; ew:name "both" .
      ex:A a rml:TriplesMap ; rml:logicalSource [ rml:source ex:src ] ; rml:subjectMap [ rml:template "a/{$.a}" ] ;
        rml:predicateObjectMap [ rml:predicate ex:p ; rml:object ex:o ] .
      ex:B a rml:TriplesMap ; rml:logicalSource [ rml:source ex:src ] ; rml:subjectMap [ rml:template "b/{$.b}" ] ;
        rml:predicateObjectMap [ rml:predicate ex:p ; rml:object ex:o ] .
      ex:C a rml:TriplesMap ; rml:logicalSource [ rml:source [ a ew:MqttStream ; ew:topicFilter "u/#" ] ] ;
        rml:subjectMap [ rml:constant ex:c ] ; rml:predicateObjectMap [ rml:predicate ex:p ; rml:object "k" ] .
    """
    routes = {r.topic_filter: r for r in compile_text(text)}
    assert routes["t/+"].name == "both" and routes["u/#"].name == "C"
    assert len(routes["t/+"].map(b'{"a": 1, "b": 2}', "t/x", 0)) == 2
