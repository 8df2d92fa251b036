"""Match.entailed: which contributing triples were entailed, from which asserted triple, by which axioms."""
from __future__ import annotations

from edgewave.agent.engine import Engine, parse_query
from edgewave.agent.engine.evidence import Entailment

RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
SUBPROP = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
DOMAIN = "<http://www.w3.org/2000/01/rdf-schema#domain>"
RANGE = "<http://www.w3.org/2000/01/rdf-schema#range>"
INVERSE = "<http://www.w3.org/2002/07/owl#inverseOf>"
SYMMETRIC = "<http://www.w3.org/2002/07/owl#SymmetricProperty>"


def ex(local: str) -> str:
    return f"<http://ex.org/{local}>"


def acme(local: str) -> str:
    return f"<https://acme.example/ns#{local}>"


def query(where: str, static: str = "", name: str = "q") -> str:
    return f"""
PREFIX ex: <http://ex.org/>
PREFIX acme: <https://acme.example/ns#>
REGISTER RSTREAM <{name}> AS SELECT *
FROM NAMED WINDOW <w> ON <http://ex.org/stream> [RANGE PT10S STEP PT1S]
WHERE {{ WINDOW <w> {{ {where} }} {static} }}
"""


def run(schema, text: str, stream, static=(), entailment: bool = True) -> list:
    out: list = []
    engine = Engine(schema=schema, entailment=entailment, on_match=out.append)
    engine.add_query(text)
    engine.add_static(static)
    for i, triple in enumerate(stream):
        engine.push(triple, 1000 + i)
    return out


# The demo's case: a vendor's sensor says where it is in its own terms; the pattern asks in ours.
VENDOR_SCHEMA = [
    (acme("locatedIn"), SUBPROP, ex("locatedIn")),
    (acme("locatedIn"), RANGE, acme("Space")),
    (acme("Space"), SUBCLASS, ex("Room")),
]
IN_ROOM = query("?sensor ex:locatedIn ?room . ?room a ex:Room .", "?room ex:inBuilding ?building .")
ASSERTED = (ex("sensor7"), acme("locatedIn"), ex("room3"))
IN_BUILDING = (ex("room3"), ex("inBuilding"), ex("b1"))


def test_each_entailed_triple_names_its_asserted_source_and_axiom_chain():
    [match] = run(VENDOR_SCHEMA, IN_ROOM, [ASSERTED], static=[IN_BUILDING])
    assert match.entailed == (
        Entailment((ex("sensor7"), ex("locatedIn"), ex("room3")), 1000, ASSERTED, "SO", ex("locatedIn"),
                   ((acme("locatedIn"), SUBPROP, ex("locatedIn")),)),
        Entailment((ex("room3"), RDF_TYPE, ex("Room")), 1000, ASSERTED, "O", ex("Room"),
                   ((acme("locatedIn"), RANGE, acme("Space")), (acme("Space"), SUBCLASS, ex("Room")))),
    )
    # The static triple, asserted, is among the contributing triples but not marked.
    assert (IN_BUILDING, -1) in match.triples
    assert IN_BUILDING not in [e.triple for e in match.entailed]


def test_asserted_triples_are_not_marked():
    stream = [(ex("sensor7"), ex("locatedIn"), ex("room3")), (ex("room3"), RDF_TYPE, ex("Room"))]
    [match] = run(VENDOR_SCHEMA, IN_ROOM, stream, static=[IN_BUILDING])
    assert len(match.triples) == 3
    assert match.entailed == ()


def test_with_entailment_off_nothing_is_marked():
    stream = [(ex("sensor7"), ex("locatedIn"), ex("room3")), (ex("room3"), RDF_TYPE, ex("Room"))]
    [match] = run(VENDOR_SCHEMA, IN_ROOM, stream, static=[IN_BUILDING], entailment=False)
    assert match.entailed == ()
    assert run(VENDOR_SCHEMA, IN_ROOM, [ASSERTED], static=[IN_BUILDING], entailment=False) == []


def test_domain_then_subclasses():
    schema = [(ex("reads"), DOMAIN, ex("Meter")), (ex("Meter"), SUBCLASS, ex("Sensor")),
              (ex("Sensor"), SUBCLASS, ex("Device"))]
    source = (ex("m1"), ex("reads"), ex("v1"))
    [match] = run(schema, query("?d a ex:Device ."), [source])
    [e] = match.entailed
    assert (e.triple, e.source, e.form, e.target) == ((ex("m1"), RDF_TYPE, ex("Device")), source, "S", ex("Device"))
    assert e.axioms == ((ex("reads"), DOMAIN, ex("Meter")), (ex("Meter"), SUBCLASS, ex("Sensor")),
                        (ex("Sensor"), SUBCLASS, ex("Device")))


def test_a_type_entailed_from_a_type_cites_the_subclass_chain():
    schema = [(ex("Thermometer"), SUBCLASS, ex("TemperatureSensor")), (ex("TemperatureSensor"), SUBCLASS, ex("Sensor"))]
    source = (ex("t1"), RDF_TYPE, ex("Thermometer"))
    [match] = run(schema, query("?s a ex:Sensor ."), [source])
    [e] = match.entailed
    assert (e.source, e.form, e.target) == (source, "S", ex("Sensor"))
    assert e.axioms == ((ex("Thermometer"), SUBCLASS, ex("TemperatureSensor")),
                        (ex("TemperatureSensor"), SUBCLASS, ex("Sensor")))


def test_inverse_is_cited_as_the_schema_wrote_it_in_both_directions():
    schema = [(ex("hosts"), INVERSE, ex("isHostedBy"))]
    forward = (ex("platform"), ex("hosts"), ex("s1"))
    [match] = run(schema, query("?s ex:isHostedBy ?p ."), [forward])
    assert match.entailed == (Entailment((ex("s1"), ex("isHostedBy"), ex("platform")), 1000, forward, "OS",
                                         ex("isHostedBy"), ((ex("hosts"), INVERSE, ex("isHostedBy")),)),)
    backward = (ex("s1"), ex("isHostedBy"), ex("platform"))
    [match] = run(schema, query("?p ex:hosts ?s ."), [backward])
    [e] = match.entailed
    assert (e.triple, e.form, e.axioms) == (forward, "OS", ((ex("hosts"), INVERSE, ex("isHostedBy")),))


def test_symmetric_property():
    schema = [(ex("adjacentTo"), RDF_TYPE, SYMMETRIC)]
    source = (ex("room1"), ex("adjacentTo"), ex("room2"))
    [match] = run(schema, query("ex:room2 ex:adjacentTo ?other ."), [source])
    [e] = match.entailed
    assert (e.triple, e.form, e.axioms) == ((ex("room2"), ex("adjacentTo"), ex("room1")), "OS",
                                            ((ex("adjacentTo"), RDF_TYPE, SYMMETRIC),))


def test_inverse_then_range_then_subclass_types_the_subject():
    # madeObservation is the inverse of madeBySensor, whose range (Sensor) is then the
    # class of madeObservation's subject.
    schema = [(ex("madeObservation"), INVERSE, ex("madeBySensor")), (ex("madeBySensor"), RANGE, ex("Sensor")),
              (ex("Sensor"), SUBCLASS, ex("Device"))]
    source = (ex("s1"), ex("madeObservation"), ex("obs1"))
    [match] = run(schema, query("?d a ex:Device ."), [source])
    [e] = match.entailed
    assert (e.triple, e.form) == ((ex("s1"), RDF_TYPE, ex("Device")), "S")
    assert e.axioms == ((ex("madeObservation"), INVERSE, ex("madeBySensor")), (ex("madeBySensor"), RANGE, ex("Sensor")),
                        (ex("Sensor"), SUBCLASS, ex("Device")))


def test_subproperty_then_inverse():
    schema = [(ex("contains"), SUBPROP, ex("hasPart")), (ex("partOf"), INVERSE, ex("hasPart"))]
    source = (ex("b1"), ex("contains"), ex("room3"))
    [match] = run(schema, query("?r ex:partOf ?b ."), [source])
    [e] = match.entailed
    assert (e.triple, e.form, e.target) == ((ex("room3"), ex("partOf"), ex("b1")), "OS", ex("partOf"))
    assert e.axioms == ((ex("contains"), SUBPROP, ex("hasPart")), (ex("partOf"), INVERSE, ex("hasPart")))


def test_a_match_with_several_entailed_triples_lists_them_in_the_order_of_its_triples():
    schema = VENDOR_SCHEMA + [(acme("temp"), SUBPROP, ex("temperature"))]
    text = query("?sensor ex:locatedIn ?room . ?room a ex:Room . ?sensor ex:temperature ?t .")
    stream = [ASSERTED, (ex("sensor7"), acme("temp"), '"61"')]
    [match] = run(schema, text, stream)
    entailed = [(e.triple, e.ts) for e in match.entailed]
    assert entailed == [item for item in match.triples]   # all three were entailed
    assert [e.source for e in match.entailed] == [ASSERTED, ASSERTED, stream[1]]


STATIC_SCHEMA = [(ex("hasRoom"), INVERSE, ex("inBuilding")), (ex("contains"), SUBPROP, ex("hasRoom"))]


def test_static_triples_entailed_from_static_data_are_marked():
    text = query("?sensor ex:locatedIn ?room .", "?room ex:inBuilding ?building .")
    static = [(ex("b1"), ex("hasRoom"), ex("room3"))]
    [match] = run(STATIC_SCHEMA, text, [(ex("sensor7"), ex("locatedIn"), ex("room3"))], static=static)
    assert match.entailed == (Entailment((ex("room3"), ex("inBuilding"), ex("b1")), -1, static[0], "OS",
                                         ex("inBuilding"), ((ex("hasRoom"), INVERSE, ex("inBuilding")),)),)


def test_a_static_triple_still_entailed_after_its_first_source_is_removed_names_the_other():
    out: list = []
    engine = Engine(schema=STATIC_SCHEMA, on_match=out.append)
    engine.add_query(query("?sensor ex:locatedIn ?room .", "?room ex:inBuilding ?building ."))
    first, second = (ex("b1"), ex("hasRoom"), ex("room3")), (ex("b1"), ex("contains"), ex("room3"))
    engine.add_static([first, second])
    engine.remove_static([first])
    engine.push((ex("sensor7"), ex("locatedIn"), ex("room3")), 1000)
    [e] = out[0].entailed
    assert e.source == second
    assert e.axioms == ((ex("contains"), SUBPROP, ex("hasRoom")), (ex("hasRoom"), INVERSE, ex("inBuilding")))


def test_a_static_triple_both_entailed_and_asserted_is_not_marked():
    text = query("?sensor ex:locatedIn ?room .", "?room ex:inBuilding ?building .")
    static = [(ex("b1"), ex("hasRoom"), ex("room3")), (ex("room3"), ex("inBuilding"), ex("b1"))]
    [match] = run(STATIC_SCHEMA, text, [(ex("sensor7"), ex("locatedIn"), ex("room3"))], static=static)
    assert match.entailed == ()


def test_a_query_added_later_keeps_the_sources_of_the_entries_it_is_given():
    out: list = []
    engine = Engine(schema=VENDOR_SCHEMA, on_match=out.append)
    engine.add_query(query("?sensor ex:locatedIn ?room .", name="first"))
    engine.push(ASSERTED, 1000)
    # Its memory for ?sensor ex:locatedIn ?room is keyed by ?room: filled from the first one's.
    engine.add_query(query("?room ex:name ?n . ?sensor ex:locatedIn ?room .", name="second"))
    engine.push((ex("room3"), ex("name"), '"Lab"'), 1001)
    [match] = [m for m in out if m.pattern == "second"]
    [e] = match.entailed
    assert (e.triple, e.source, e.axioms) == ((ex("sensor7"), ex("locatedIn"), ex("room3")), ASSERTED,
                                              ((acme("locatedIn"), SUBPROP, ex("locatedIn")),))


def test_a_schema_replaced_after_the_triple_was_entailed_still_names_the_source():
    out: list = []
    engine = Engine(schema=VENDOR_SCHEMA, on_match=out.append)
    engine.add_query(query("?sensor ex:locatedIn ?room . ?sensor ex:name ?n ."))
    engine.push(ASSERTED, 1000)
    engine.set_schema([])
    engine.push((ex("sensor7"), ex("name"), '"s7"'), 1001)
    [e] = out[0].entailed
    assert (e.triple, e.source, e.form, e.axioms) == ((ex("sensor7"), ex("locatedIn"), ex("room3")), ASSERTED, "SO", ())
