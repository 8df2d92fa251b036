"""The reference itself, checked against answers known independently of any engine.

If the reference were wrong, the differential suite would compare the engine with a wrong
oracle; these tests pin it to the paper's worked example, to the window edges, and to the
one-premise argument its attribution of contributing triples relies on.
"""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from .cases import CLASSES, OBJECT_PROPERTIES, RDF_TYPE, SUBCLASS, VALUE_PROPERTIES, instance_triples, schemas
from .reference import RefQuery, RefWindow, Terms, Vocabulary, closure, reference_matches

T = "http://example.org/t#"


def t(local: str) -> str:
    return f"<{T}{local}>"


LISTING_1 = [  # Sparkwave, Listing 1(a): (triple, timestamp)
    ((t("t11"), t("a"), t("b")), 10), ((t("t21"), t("m"), t("n")), 20), ((t("t12"), t("a"), t("b")), 40),
    ((t("t11"), t("c"), t("t21")), 60), ((t("t22"), t("m"), t("n")), 60), ((t("t21"), t("l"), t("o")), 70),
    ((t("t12"), t("c"), t("t22")), 80), ((t("t22"), t("l"), t("o")), 90), ((t("t31"), t("p"), t("q")), 120),
    ((t("t32"), t("p"), t("q")), 170),
]
STREAM = "<urn:s>"


def test_sparkwave_listing_1_gives_exactly_g1_and_g2():
    # the reference needs distinct timestamps: move the second triple at 60 by one tick
    stream = [(triple, ts + (1 if triple[0] == t("t22") and ts == 60 else 0), STREAM) for triple, ts in LISTING_1]
    query = RefQuery([((("?x", t("a"), t("b"))), 0), (("?x", t("c"), "?y"), 0), (("?y", t("m"), t("n")), 0)],
                     [RefWindow((STREAM,), 50)])
    vocabulary = ([], [t(p) for p in "abcmnlpq"])
    found = reference_matches(query, [], [], stream, vocabulary)
    g1 = (frozenset({"x": t("t11"), "y": t("t21")}.items()),
          tuple(sorted([((t("t11"), t("a"), t("b")), 10), ((t("t11"), t("c"), t("t21")), 60),
                        ((t("t21"), t("m"), t("n")), 20)])))
    g2 = (frozenset({"x": t("t12"), "y": t("t22")}.items()),
          tuple(sorted([((t("t12"), t("a"), t("b")), 40), ((t("t12"), t("c"), t("t22")), 80),
                        ((t("t22"), t("m"), t("n")), 61)])))
    assert found == Counter({g1: 1, g2: 1})
    narrower = reference_matches(RefQuery(query.patterns, [RefWindow((STREAM,), 49)]), [], [], stream, vocabulary)
    assert narrower == Counter({g2: 1})  # T(G1) = (10, 60) no longer fits


def test_window_edges_are_inclusive_and_static_data_does_not_widen():
    schema = [(t("Hot"), SUBCLASS, t("Alarm"))]
    stream = [((t("s1"), RDF_TYPE, t("Hot")), 100, STREAM), ((t("s1"), t("in"), t("r1")), 110, STREAM)]
    static = [(t("r1"), t("floor"), t("f3"))]
    query = RefQuery([(("?s", RDF_TYPE, t("Alarm")), 0), (("?s", t("in"), "?r"), 0), (("?r", t("floor"), "?f"), None)],
                     [RefWindow((STREAM,), 10)])
    vocabulary = ([t("Hot"), t("Alarm")], [t("in"), t("floor")])
    (key,) = reference_matches(query, schema, static, stream, vocabulary)
    assert dict(key[0]) == {"s": t("s1"), "r": t("r1"), "f": t("f3")}
    assert key[1] == tuple(sorted([((t("s1"), RDF_TYPE, t("Alarm")), 100), ((t("s1"), t("in"), t("r1")), 110),
                                   ((t("r1"), t("floor"), t("f3")), -1)]))
    narrow = RefQuery(query.patterns, [RefWindow((STREAM,), 9)])
    assert not reference_matches(narrow, schema, static, stream, vocabulary)
    assert not reference_matches(query, schema, static, stream, vocabulary, entailment=False)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(schemas(), st.lists(instance_triples(), min_size=1, max_size=8))
def test_a_snapshot_closure_is_the_union_of_one_triple_closures(schema, instances):
    """The argument behind attributing entailed triples to single arrivals (reference.py, step 4)."""
    terms = Terms()
    vocabulary = Vocabulary(CLASSES, OBJECT_PROPERTIES + VALUE_PROPERTIES, terms)
    schema_nodes = [terms.triple(x) for x in schema]

    def restricted(triples):
        return {x for x in closure(schema_nodes + [terms.triple(y) for y in triples], True) if vocabulary.keep(x)}

    union = set().union(*(restricted([x]) for x in instances))
    assert restricted(instances) == union
