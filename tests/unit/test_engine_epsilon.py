"""The epsilon-network: one case per runtime entailment rule, chains, dedup, reduction."""
from __future__ import annotations

import pytest

from edgewave.agent.engine import Engine, Query, TriplePattern, WindowSpec
from edgewave.agent.engine.epsilon import EpsilonNetwork, Schema

RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
SUBPROP = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
DOMAIN = "<http://www.w3.org/2000/01/rdf-schema#domain>"
RANGE = "<http://www.w3.org/2000/01/rdf-schema#range>"
INVERSE = "<http://www.w3.org/2002/07/owl#inverseOf>"
SYMMETRIC = "<http://www.w3.org/2002/07/owl#SymmetricProperty>"
W = WindowSpec("<w>", "<http://ex.org/stream>", 10_000)


def ex(local: str) -> str:
    return f"<http://ex.org/{local}>"


def single(pattern: tuple[str, str, str]) -> Query:
    return Query("q", (), {"<w>": W}, (TriplePattern(*pattern, "<w>"),))


def matches_for(schema, query: Query, stream, entailment: bool = True) -> list:
    out: list = []
    engine = Engine(schema=schema, entailment=entailment, on_match=out.append)
    engine.add_query(query)
    for i, triple in enumerate(stream):
        engine.push(triple, 1000 + i)
    return out


def bindings(matches) -> list[dict]:
    return [m.bindings for m in matches]


def test_rdfs2_domain_types_the_subject():
    schema = [(ex("owns"), DOMAIN, ex("Person"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Person"))), [(ex("ann"), ex("owns"), ex("car"))])
    assert bindings(found) == [{"x": ex("ann")}]
    assert matches_for(schema, single(("?x", RDF_TYPE, ex("Person"))), [(ex("ann"), ex("owns"), ex("car"))], False) == []


def test_rdfs3_range_types_the_object():
    schema = [(ex("owns"), RANGE, ex("Thing"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Thing"))), [(ex("ann"), ex("owns"), ex("car"))])
    assert bindings(found) == [{"x": ex("car")}]


def test_rdfs3_never_types_a_literal():
    schema = [(ex("age"), RANGE, ex("Number"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Number"))), [(ex("ann"), ex("age"), '"42"')])
    assert found == []


def test_rdfs7_subproperty():
    schema = [(ex("mother"), SUBPROP, ex("parent"))]
    found = matches_for(schema, single(("?x", ex("parent"), "?y")), [(ex("ann"), ex("mother"), ex("bob"))])
    assert bindings(found) == [{"x": ex("ann"), "y": ex("bob")}]


def test_rdfs9_subclass():
    schema = [(ex("Dog"), SUBCLASS, ex("Animal"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Animal"))), [(ex("rex"), RDF_TYPE, ex("Dog"))])
    assert bindings(found) == [{"x": ex("rex")}]


def test_transitive_hierarchies_are_closed():
    schema = [(ex("Puppy"), SUBCLASS, ex("Dog")), (ex("Dog"), SUBCLASS, ex("Animal")),
              (ex("a"), SUBPROP, ex("b")), (ex("b"), SUBPROP, ex("c"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Animal"))), [(ex("rex"), RDF_TYPE, ex("Puppy"))])
    assert bindings(found) == [{"x": ex("rex")}]
    found = matches_for(schema, single(("?x", ex("c"), "?y")), [(ex("s"), ex("a"), ex("o"))])
    assert bindings(found) == [{"x": ex("s"), "y": ex("o")}]


def test_inverse_property_swaps_subject_and_object():
    schema = [(ex("hasChild"), INVERSE, ex("hasParent"))]
    q = single(("?child", ex("hasParent"), "?parent"))
    assert bindings(matches_for(schema, q, [(ex("ann"), ex("hasChild"), ex("bob"))])) == [
        {"child": ex("bob"), "parent": ex("ann")}
    ]
    # inv1: declared one way, it works both ways.
    q = single(("?parent", ex("hasChild"), "?child"))
    assert bindings(matches_for(schema, q, [(ex("bob"), ex("hasParent"), ex("ann"))])) == [
        {"parent": ex("ann"), "child": ex("bob")}
    ]


def test_symmetric_property():
    schema = [(ex("knows"), RDF_TYPE, SYMMETRIC)]
    q = single((ex("bob"), ex("knows"), "?who"))
    assert bindings(matches_for(schema, q, [(ex("ann"), ex("knows"), ex("bob"))])) == [{"who": ex("ann")}]
    assert matches_for(schema, q, [(ex("ann"), ex("knows"), ex("bob"))], entailment=False) == []


def test_chain_through_a_class_the_pattern_does_not_name():
    # owns has domain Owner; Owner is a subclass of Agent; only Agent is in the pattern.
    schema = [(ex("owns"), DOMAIN, ex("Owner")), (ex("Owner"), SUBCLASS, ex("Agent"))]
    found = matches_for(schema, single(("?x", RDF_TYPE, ex("Agent"))), [(ex("ann"), ex("owns"), ex("car"))])
    assert bindings(found) == [{"x": ex("ann")}]


def test_chain_through_inverse_subproperty_and_range():
    # hasOwner is the inverse of owns' sub-property possesses, whose domain is Owner < Agent.
    schema = [
        (ex("possesses"), SUBPROP, ex("owns")),
        (ex("hasOwner"), INVERSE, ex("possesses")),
        (ex("possesses"), DOMAIN, ex("Owner")),
        (ex("Owner"), SUBCLASS, ex("Agent")),
    ]
    stream = [(ex("car"), ex("hasOwner"), ex("ann"))]
    assert bindings(matches_for(schema, single(("?x", ex("owns"), "?y")), stream)) == [{"x": ex("ann"), "y": ex("car")}]
    assert bindings(matches_for(schema, single(("?x", RDF_TYPE, ex("Agent"))), stream)) == [{"x": ex("ann")}]


def test_each_entailed_triple_reaches_the_alpha_network_once():
    # Two paths entail <ann a Agent>: the domain of owns and the domain of its super-property,
    # and Owner < Agent as well; and the type triple itself would entail it again.
    schema = [
        (ex("owns"), SUBPROP, ex("has")),
        (ex("owns"), DOMAIN, ex("Agent")),
        (ex("has"), DOMAIN, ex("Owner")),
        (ex("Owner"), SUBCLASS, ex("Agent")),
    ]
    query = Query("q", (), {"<w>": W}, (
        TriplePattern("?x", RDF_TYPE, ex("Agent"), "<w>"),
        TriplePattern("?x", ex("has"), "?y", "<w>"),
    ))
    found = matches_for(schema, query, [(ex("ann"), ex("owns"), ex("car"))])
    assert len(found) == 1
    assert bindings(found) == [{"x": ex("ann"), "y": ex("car")}]


def test_symmetric_self_loop_is_not_doubled():
    schema = [(ex("knows"), RDF_TYPE, SYMMETRIC), (ex("knows"), DOMAIN, ex("P")), (ex("knows"), RANGE, ex("P"))]
    q = single(("?x", ex("knows"), "?y"))
    assert len(matches_for(schema, q, [(ex("ann"), ex("knows"), ex("ann"))])) == 1
    q = single(("?x", RDF_TYPE, ex("P")))
    assert len(matches_for(schema, q, [(ex("ann"), ex("knows"), ex("ann"))])) == 1
    assert len(matches_for(schema, q, [(ex("ann"), ex("knows"), ex("bob"))])) == 2


def test_reduced_schema_keeps_only_what_patterns_can_use_and_flattens():
    schema = Schema.from_triples([
        (ex("C"), SUBCLASS, ex("D")), (ex("D"), SUBCLASS, ex("E")),
        (ex("X"), SUBCLASS, ex("Y")),  # unrelated
        (ex("p"), DOMAIN, ex("C")),
        (ex("q"), RANGE, ex("X")),  # unrelated
    ])
    eps = EpsilonNetwork(schema, pattern_classes=[ex("E")], pattern_properties=[])
    assert set(eps.class_nodes) == {ex("C"), ex("D"), ex("E")}
    assert eps.class_nodes[ex("C")].s_links == (ex("E"),)  # c -> e directly, not via d
    assert eps.class_nodes[ex("D")].s_links == (ex("E"),)
    assert set(eps.property_nodes) == {ex("p")}
    assert eps.property_nodes[ex("p")].s_links == (ex("E"),)
    assert eps.entail((ex("a"), RDF_TYPE, ex("C"))) == [(ex("a"), RDF_TYPE, ex("E"))]


def test_entailment_off_is_per_engine():
    schema = [(ex("Dog"), SUBCLASS, ex("Animal"))]
    q = single(("?x", RDF_TYPE, ex("Animal")))
    on = Engine(schema=schema)
    off = Engine(schema=schema, entailment=False)
    for engine in (on, off):
        engine.add_query(q)
        engine.push((ex("rex"), RDF_TYPE, ex("Dog")), 1)
    assert on.stats()["matches"] == 1 and on.stats()["entailed"] == 1
    assert off.stats()["matches"] == 0 and off.stats()["entailed"] == 0


def test_set_schema_rebuilds_the_epsilon_network_and_keeps_memories():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(Query("q", (), {"<w>": W}, (
        TriplePattern("?x", RDF_TYPE, ex("Animal"), "<w>"),
        TriplePattern("?x", ex("name"), "?n", "<w>"),
    )))
    engine.push((ex("rex"), ex("name"), '"Rex"'), 1)
    engine.push((ex("rex"), RDF_TYPE, ex("Dog")), 2)
    assert out == []
    engine.set_schema([(ex("Dog"), SUBCLASS, ex("Animal"))])
    engine.push((ex("rex"), RDF_TYPE, ex("Dog")), 3)  # joins the name kept from before
    assert bindings(out) == [{"x": ex("rex"), "n": '"Rex"'}]


@pytest.mark.parametrize("pattern", [("?s", "?p", "?o"), ("?s", RDF_TYPE, "?c")])
def test_variable_predicate_or_class_sees_every_entailment(pattern):
    schema = [(ex("Dog"), SUBCLASS, ex("Animal")), (ex("Animal"), SUBCLASS, ex("Being"))]
    found = matches_for(schema, single(pattern), [(ex("rex"), RDF_TYPE, ex("Dog"))])
    assert sorted(m.triples[0][0][2] for m in found) == [ex("Animal"), ex("Being"), ex("Dog")]
