"""The RML-Core conformance cases for JSON sources (tests/data/rml-core/) that fall inside edgewave's subset.

Each case's file source is replaced by an ``ew:MqttStream`` (one per file) and the file is
mapped as one message; the triples must be the case's ``output.nq`` (blank nodes compared
by isomorphism). Cases that expect an error must raise MappingError when compiled or
PayloadRejected when mapped. The cases left out, and why, are in LEFT_OUT.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import rdflib
from rdflib.compare import isomorphic

from edgewave.agent.mapping import MappingError, PayloadRejected, compile_mappings
from edgewave.shared.ntriples import parse, serialize

CASES = Path(__file__).resolve().parent.parent / "data" / "rml-core"
RML = rdflib.Namespace("http://w3id.org/rml/")
EW = rdflib.Namespace("https://edgewave.dev/ns#")

LEFT_OUT = {
    # named graphs: an edgewave event is triples in the default graph
    "RMLTC0007b-JSON": "named graph (rml:graphMap)",
    "RMLTC0007e-JSON": "named graph (rml:graphMap)",
    "RMLTC0007f-JSON": "named graph (rml:graphMap)",
    "RMLTC0008a-JSON": "named graph from a template",
    "RMLTC0009b-JSON": "named graphs",
    "RMLTC0028b-JSON": "named graphs beside the default graph",
    # joins and referencing object maps: a message is mapped alone, there is nothing to join with
    "RMLTC0008b-JSON": "referencing object map (rml:parentTriplesMap)",
    "RMLTC0009a-JSON": "join across two sources",
    "RMLTC0011b-JSON": "join across sources (many-to-many)",
    "RMLTC0021a-JSON": "join condition",
    "RMLTC0030a-JSON": "join condition", "RMLTC0030b-JSON": "join condition",
    "RMLTC0030c-JSON": "join condition", "RMLTC0030d-JSON": "join condition",
    "RMLTC0030e-JSON": "join condition", "RMLTC0030f-JSON": "join condition",
    # datatype and language maps that are not constants
    "RMLTC0022b-JSON": "reference-valued rml:datatypeMap",
    "RMLTC0022c-JSON": "template-valued rml:datatypeMap",
    "RMLTC0022e-JSON": "reference-valued rml:datatypeMap",
    "RMLTC0031b-JSON": "reference-valued rml:languageMap",
    "RMLTC0031c-JSON": "template-valued rml:languageMap",
    # data errors: RML drops the failing iteration and keeps the rest; edgewave refuses the whole
    # message (an event is accepted whole or not at all)
    "RMLTC0019b-JSON": "a data error drops one row in RML; edgewave rejects the message",
    # the source itself is the case
    "RMLTC0002e-JSON": "a missing input file (edgewave has no file sources)",
    "RMLTC0012e-JSON": "no input file (the mapping generates from an absent source)",
    "RMLTC0006a-JSON": "named graph (rml:graphMap with a constant)",
    # the mapping is not Turtle (an escape Turtle does not have): rdflib refuses it before edgewave reads it
    "RMLTC0023c-JSON": "not valid Turtle: refused by rdflib, not by the compiler",
    # an unsafe IRI holding a space cannot be an N-Triples term
    "RMLTC0027b-JSON": "rml:UnsafeIRI with spaces: not a valid N-Triples IRI term",
}


def _metadata() -> dict[str, dict[str, str]]:
    out = {}
    for name in sorted(p.name for p in CASES.glob("RMLTC*-JSON")):
        text = (CASES / name / "README.md").read_text()
        out[name] = {"error": "**Error expected?** Yes" in text}
    return out


METADATA = _metadata()


def _as_mqtt(mapping: Path) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """The mapping with each file source swapped for an MQTT source; {topic: file name}."""
    graph = rdflib.Graph()
    graph.parse(mapping, format="turtle")
    topics: dict[str, str] = {}
    for logical, source in list(graph.subject_objects(RML.source)):
        path = graph.value(source, RML.path)
        if path is None:
            continue
        topic = f"file/{path}"
        node = rdflib.URIRef(f"urn:test:{path}")
        graph.remove((logical, RML.source, source))
        for triple in list(graph.triples((source, None, None))):
            graph.remove(triple)
        graph.add((logical, RML.source, node))
        graph.add((node, rdflib.RDF.type, EW.MqttStream))
        graph.add((node, EW.topicFilter, rdflib.Literal(topic)))
        topics[topic] = str(path)
    return parse(graph.serialize(format="nt")), topics


def _run(name: str) -> list[tuple[str, str, str]]:
    folder = CASES / name
    triples, topics = _as_mqtt(folder / "mapping.ttl")
    out: list[tuple[str, str, str]] = []
    for compiled in compile_mappings(triples, default_base_iri="http://example.com/"):
        data = (folder / topics[compiled.topic_filter]).read_bytes()
        try:
            out.extend(compiled.map(data, compiled.topic_filter, 0))
        except PayloadRejected as exc:
            if exc.reason != "no_triples":
                raise
    return out


def _graph(triples) -> rdflib.Graph:
    graph = rdflib.Graph()
    graph.parse(data="\n".join(serialize(t) for t in triples), format="nt")
    return graph


INCLUDED = [name for name in METADATA if name not in LEFT_OUT]


def test_every_case_is_run_or_left_out_with_a_reason():
    assert set(LEFT_OUT) <= set(METADATA)
    assert len(INCLUDED) >= 40


@pytest.mark.parametrize("name", INCLUDED)
def test_case(name: str) -> None:
    if METADATA[name]["error"]:
        with pytest.raises((MappingError, PayloadRejected)):
            _run(name)
        return
    got = _run(name)
    expected_file = CASES / name / "output.nq"
    expected = parse(expected_file.read_text()) if expected_file.exists() else []
    if any(t.startswith("_:") for triple in expected for t in triple):
        assert isomorphic(_graph(got), _graph(expected)), sorted(got)
    else:
        assert set(got) == set(expected)
