"""Uplink events: plain JSON for Spark, real RDF for a JSON-LD processor, stable ids."""
from __future__ import annotations

import json
import re

import pytest
import rdflib
from rdflib import Literal, URIRef

from edgewave.agent.engine.evidence import Entailment
from edgewave.shared import events
from edgewave.shared.vocab import EW_NS

ROOM = "<http://example.org/site/room3>"
T1 = (("<http://example.org/obs/1>", "<http://www.w3.org/ns/sosa/hasSimpleResult>",
       '"61.5"^^<http://www.w3.org/2001/XMLSchema#decimal>'), 1000)
T2 = (("<http://example.org/obs/2>", "<http://www.w3.org/ns/sosa/madeBySensor>",
       "<http://example.org/sensor/smoke-1>"), 1500)


def make_match(**overrides):
    args = dict(gateway="gw1", pattern="fire", bindings={"room": ROOM, "temp": T1[0][2]},
                start=1000, end=1500, triples=[T1, T2], emitted_at=1502)
    args.update(overrides)
    return events.match_event(**args)


def test_round_trip_through_json_keeps_every_field_of_the_schema():
    event = make_match()
    decoded = events.decode_event(events.encode_event(event))
    assert decoded == {k: v for k, v in json.loads(json.dumps(event)).items() if k != "@context"}
    assert events.bindings_dict(decoded) == {"room": ROOM, "temp": T1[0][2]}
    assert decoded["triples"][0] == f"{T1[0][0]} {T1[0][1]} {T1[0][2]} ."


def test_id_is_stable_and_depends_on_content():
    assert make_match()["id"] == make_match(emitted_at=99999)["id"], "re-emission must keep the id"
    assert make_match()["id"] == make_match(triples=[T2, T1])["id"], "order of contribution is not identity"
    assert make_match()["id"] != make_match(gateway="gw2")["id"]
    assert make_match()["id"] != make_match(pattern="other")["id"]
    assert make_match()["id"] != make_match(triples=[T1, (T2[0], 1501)])["id"]


def test_json_ld_parses_to_the_intended_triples():
    event = make_match()
    graph = rdflib.Graph().parse(data=events.encode_event(event).decode(), format="json-ld")
    ew = rdflib.Namespace(EW_NS)
    node = URIRef(event["id"])
    assert (node, rdflib.RDF.type, ew.Match) in graph
    assert graph.value(node, ew.gateway) == Literal("gw1")
    assert graph.value(node, ew.pattern) == Literal("fire")
    assert graph.value(node, ew.windowStart) == Literal(1000, datatype=rdflib.XSD.long)
    assert graph.value(node, ew.windowEnd) == Literal(1500, datatype=rdflib.XSD.long)
    bindings = {str(graph.value(b, ew.variable)): str(graph.value(b, ew.value)) for b in graph.objects(node, ew.binding)}
    assert bindings == {"room": ROOM, "temp": T1[0][2]}
    statements = list(rdflib.collection.Collection(graph, graph.value(node, ew.triple)))
    assert [str(s) for s in statements] == event["triples"]
    # Nulls are absent in RDF, not "None" strings.
    assert graph.value(node, ew.sensor) is None


def test_significant_event_shape():
    obs = ("<http://example.org/obs/9>", "<http://www.w3.org/ns/sosa/hasSimpleResult>", '"21"^^<http://www.w3.org/2001/XMLSchema#integer>')
    event = events.significant_event("gw1", "<http://example.org/sensor/t1>", "<http://example.org/prop/temperature>",
                                     obs[2], 5000, [obs], 5001)
    decoded = events.decode_event(events.encode_event(event))
    assert decoded["kind"] == "significant" and decoded["windowStart"] == decoded["windowEnd"] == 5000
    assert decoded["sensor"] == "<http://example.org/sensor/t1>"
    graph = rdflib.Graph().parse(data=events.encode_event(event).decode(), format="json-ld")
    assert (URIRef(event["id"]), rdflib.RDF.type, rdflib.Namespace(EW_NS).Significant) in graph


@pytest.mark.parametrize("payload, reason", [
    (b"not json", "not JSON"),
    (b"[1,2]", "JSON object"),
    (b'{"id": "urn:edgewave:event:1"}', "missing fields"),
    (json.dumps({**make_match(), "kind": "other"}).encode(), "unknown kind"),
    (json.dumps({**make_match(), "windowEnd": "late"}).encode(), "windowEnd"),
    (json.dumps({**make_match(), "id": "x"}).encode(), "bad event id"),
])
def test_bad_payloads_are_rejected_with_a_reason(payload, reason):
    with pytest.raises(events.EventError, match=reason):
        events.decode_event(payload)


INTEGER_FIELDS = [f.name for f in events.FIELDS if f.type == events.LONG]


@pytest.mark.parametrize("field", INTEGER_FIELDS)
@pytest.mark.parametrize("value", [True, False, 1.5, "1500", 2 ** 63, -(2 ** 63) - 1, 10 ** 19],
                         ids=["true", "false", "float", "string", "2^63", "-2^63-1", "1e19"])
def test_an_integer_field_spark_would_read_as_null_is_rejected_with_the_field_named(field, value):
    payload = json.dumps({**make_match(), field: value}).encode()
    with pytest.raises(events.EventError, match=field):
        events.decode_event(payload)


@pytest.mark.parametrize("value", [2 ** 63 - 1, -(2 ** 63)])
def test_the_64_bit_bounds_themselves_are_accepted(value):
    assert events.decode_event(json.dumps({**make_match(), "emittedAt": value}).encode())["emittedAt"] == value


@pytest.mark.parametrize("payload, reason", [
    (b"[" * 100_000 + b"]" * 100_000, "nesting depth"),
    (b'{"a": ' + b"9" * 5000 + b"}", "digits"),
    (json.dumps({**make_match(), "gateway": "gw\ud800"}).encode(), "surrogate"),
    (b"\xff\xfe{}", "UTF-8"),
    (b" " * (events.EventLimits().max_bytes + 1), "bytes"),
    (json.dumps({**make_match(), "triples": ["<a> <b> <c> ."] * 10_001}).encode(), "triples"),
    (json.dumps({**make_match(), "windowEnd": float("nan")}).encode(), "NaN"),
    (json.dumps({**make_match(), "bindings": [{"variable": "x", "value": 1}]}).encode(), "bindings"),
    (json.dumps({**make_match(), "type": "Significant"}).encode(), "does not go with kind"),
])
def test_hostile_payloads_are_an_event_error_not_a_crash(payload, reason):
    with pytest.raises(events.EventError, match=reason):
        events.decode_event(payload)


# A match's evidence: ex:room3 a ex:Room, entailed from a vendor's triple by range + subClassOf.
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
RANGE = "<http://www.w3.org/2000/01/rdf-schema#range>"
LOCATED = ("<http://example.org/sensor7>", "<https://acme.example/ns#locatedIn>", ROOM)
IS_ROOM = (ROOM, RDF_TYPE, "<http://example.org/Room>")
AXIOMS = (("<https://acme.example/ns#locatedIn>", RANGE, "<https://acme.example/ns#Space>"),
          ("<https://acme.example/ns#Space>", SUBCLASS, "<http://example.org/Room>"))
ENTAILED = [Entailment(IS_ROOM, 1500, LOCATED, "O", IS_ROOM[2], AXIOMS)]


def statement(triple) -> str:
    return f"{triple[0]} {triple[1]} {triple[2]} ."


def test_a_match_event_carries_which_triples_were_entailed_and_by_which_axioms():
    event = make_match(triples=[(LOCATED, 1500), (IS_ROOM, 1500)], entailed=ENTAILED)
    decoded = events.decode_event(events.encode_event(event))
    assert decoded["entailed"] == [{"triple": statement(IS_ROOM), "from": statement(LOCATED),
                                    "axioms": [statement(a) for a in AXIOMS]}]
    assert decoded == {k: v for k, v in json.loads(json.dumps(event)).items() if k != "@context"}
    # The id names the match, not its explanation.
    assert event["id"] == make_match(triples=[(LOCATED, 1500), (IS_ROOM, 1500)])["id"]


def test_a_match_with_nothing_entailed_says_so_and_an_event_without_the_field_still_decodes():
    assert events.decode_event(events.encode_event(make_match()))["entailed"] == []
    older = {k: v for k, v in make_match().items() if k != "entailed"}   # an agent from before the field
    assert events.decode_event(events.encode_event(older))["entailed"] is None


def test_entailed_evidence_is_rdf_for_a_json_ld_processor():
    event = make_match(triples=[(LOCATED, 1500), (IS_ROOM, 1500)], entailed=ENTAILED)
    graph = rdflib.Graph().parse(data=events.encode_event(event).decode(), format="json-ld")
    ew = rdflib.Namespace(EW_NS)
    [entry] = list(graph.objects(URIRef(event["id"]), ew.entailed))
    assert graph.value(entry, ew.statement) == Literal(statement(IS_ROOM))
    assert graph.value(entry, ew.entailedFrom) == Literal(statement(LOCATED))
    chain = list(rdflib.collection.Collection(graph, graph.value(entry, ew.axiom)))
    assert [str(a) for a in chain] == [statement(a) for a in AXIOMS]   # in order: a list, not a set


def test_the_agent_cuts_evidence_to_what_ingest_accepts():
    limits = events.EventLimits()
    short = Entailment(IS_ROOM, 1500, LOCATED, "O", IS_ROOM[2], AXIOMS)
    assert len(events.entailed_entries([short] * (limits.max_entailed + 5), max_bytes=10 ** 9)) == limits.max_entailed
    long_chain = Entailment(IS_ROOM, 1500, LOCATED, "O", IS_ROOM[2], AXIOMS * 40)
    [entry] = events.entailed_entries([long_chain])
    assert entry["axioms"] == [statement(a) for a in (AXIOMS * 40)[:limits.max_axioms]]
    # However pathological the schema, the event stays within ingest's limits: the match is not lost.
    event = make_match(triples=[(LOCATED, 1500), (IS_ROOM, 1500)], entailed=[long_chain] * (limits.max_entailed + 5))
    entailed = events.decode_event(events.encode_event(event))["entailed"]
    assert 0 < len(entailed) < limits.max_entailed
    assert len(json.dumps(entailed)) < 2 * events.EVIDENCE_MAX_BYTES


GOOD_ENTRY = {"triple": "<a> <b> <c> .", "from": "<a> <d> <c> .", "axioms": ["<d> <e> <b> ."]}


@pytest.mark.parametrize("value, reason", [
    ({"triple": "x"}, "array of {triple, from, axioms}"),
    ([{**GOOD_ENTRY, "triple": 1}], "array of {triple, from, axioms}"),
    ([{k: v for k, v in GOOD_ENTRY.items() if k != "from"}], "array of {triple, from, axioms}"),
    ([{**GOOD_ENTRY, "axioms": "<d> <e> <b> ."}], "array of {triple, from, axioms}"),
    ([{**GOOD_ENTRY, "axioms": [None]}], "array of {triple, from, axioms}"),
    (["<a> <b> <c> ."], "array of {triple, from, axioms}"),
    ([GOOD_ENTRY] * 1001, "1001 entries"),
    ([{**GOOD_ENTRY, "axioms": ["<d> <e> <b> ."] * 33}], "33 axioms"),
])
def test_malformed_evidence_is_rejected_with_the_field_named(value, reason):
    with pytest.raises(events.EventError, match=rf"entailed.*{re.escape(reason)}|{re.escape(reason)}"):
        events.decode_event(json.dumps({**make_match(), "entailed": value}).encode())


def test_evidence_nests_within_the_default_depth_and_a_tighter_limit_is_configurable():
    event = make_match(triples=[(LOCATED, 1500), (IS_ROOM, 1500)], entailed=ENTAILED)
    payload = events.encode_event(event)
    assert events.decode_event(payload, events.EventLimits(max_depth=4))["entailed"]
    with pytest.raises(events.EventError, match="axioms"):
        events.decode_event(payload, events.EventLimits(max_axioms=1))
