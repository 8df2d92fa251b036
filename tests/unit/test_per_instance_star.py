"""The star node (``per_instance/star_node``): three or more patterns joined on one variable
as one memory give what the chain of join nodes gives, to the last character and in the
same order (rows of an instance, groups, GROUP_CONCAT's order), including where several
patterns hold more than one solution for a key (the order the chain's intermediate
memories hold is then worked out from when each solution entered).

The reference is the same evaluator with the compiler never choosing the star node."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.per_instance import InstanceEvaluator
from edgewave.agent.engine.per_instance import compiler as compiler_module
from edgewave.agent.engine.per_instance.join_node import JoinNode
from edgewave.agent.engine.per_instance.star_node import StarNode, _prefix

EX = "http://ex.org/st#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
HEAD = f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT {{select}}
FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{{{ WINDOW <urn:w> {{{{ {{where}} }}}} }}}} {{tail}}"""

# (select, where, after WHERE, how many patterns the star takes)
QUERIES = {
    "rows, three patterns": ("*", "?o a :Offer ; :product ?p ; :price ?v", "", 3),
    "rows, four patterns": ("*", "?o :a ?x ; :b ?y ; :c ?z ; :d ?w", "", 4),
    "rows, five patterns": ("*", "?o :a ?x ; :b ?y ; :c ?z ; :d ?w ; :e ?u", "", 5),
    "a star, then a join": ("?t (GROUP_CONCAT(STR(?v)) AS ?g) (COUNT(*) AS ?n) (SAMPLE(?o) AS ?s)",
                            "?o a :Offer ; :product ?p ; :price ?v . ?p a ?t", "GROUP BY ?t", 3),
    "order-sensitive aggregates": ("?x (GROUP_CONCAT(CONCAT(STR(?y), STR(?z), STR(?w))) AS ?g)",
                                   "?o :a ?x ; :b ?y ; :c ?z ; :d ?w", "GROUP BY ?x", 4),
    "star on the object": ("*", "?x :a ?o . ?y :b ?o . ?z :c ?o", "", 3),
    "distinct, order, limit": ("DISTINCT ?x ?y", "?o :a ?x ; :b ?y ; :c ?z", "ORDER BY ?y LIMIT 5", 3),
}
PREDICATES = ["a", "b", "c", "d", "e", "product", "price"]


def _query(name: str) -> str:
    select, where, tail, _ = QUERIES[name]
    return HEAD.format(select=select, where=where, tail=tail)


def _stream(rng: random.Random, n: int, keys: int = 4, values: int = 3) -> list[tuple[int, tuple]]:
    """Few subjects and few values, so that a key holds several solutions in several
    patterns at once; triples sent twice, and each in either direction (star on the object)."""
    items, ts = [], 1_000
    for _ in range(n):
        ts += 1500 if rng.random() < 0.02 else rng.choice([0, 0, 1, 5, 20, 60])
        s = f"<{EX}o{rng.randint(1, keys)}>"
        p = rng.choice(PREDICATES)
        o = f"<{EX}v{rng.randint(1, values)}>"
        if p == "price":
            o = f'"{rng.randint(1, values)}"'
        if rng.random() < 0.15:
            typed = s if rng.random() < 0.5 else f"<{EX}v{rng.randint(1, values)}>"
            kind = f"<{EX}Offer>" if rng.random() < 0.6 else f"<{EX}T{rng.randint(1, 2)}>"
            items.append((ts, (typed, RDF_TYPE, kind)))
            continue
        triple = (s, f"<{EX}{p}>", o)
        if rng.random() < 0.3:
            triple = (o if p != "price" else s, triple[1], s if p != "price" else o)
        items.append((ts, triple))
    return items


def _run(query: str, items: list, star: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list, object]:
    with monkeypatch.context() as patch:
        if not star:
            patch.setattr(compiler_module, "_star_run", lambda ordered: None)
        evaluator = InstanceEvaluator(query)
    reported: list = []
    evaluator.push_many(items, "<urn:s>", reported.extend)
    reported.extend(evaluator.finish())
    return [r.as_json() for r in reported], evaluator.network


def _star_of(network) -> StarNode | None:
    node = network.root
    while node is not None and not isinstance(node, StarNode):
        node = node.inputs[0] if node.inputs else None
    return node


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("seed", range(6))
def test_the_star_node_reports_what_the_chain_of_joins_reports(name: str, seed: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    items = _stream(random.Random(seed), 600)
    ours, network = _run(_query(name), items, True, monkeypatch)
    reference, reference_network = _run(_query(name), items, False, monkeypatch)
    star = _star_of(network)
    assert star is not None and star.m == QUERIES[name][3]
    assert _star_of(reference_network) is None
    assert ours == reference
    assert any(report["rows"] for report in ours)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(20, 300), st.sampled_from(sorted(QUERIES)),
       st.integers(1, 5), st.integers(1, 4))
def test_random_streams_give_the_same_reports(seed: int, n: int, name: str, keys: int, values: int) -> None:
    items = _stream(random.Random(seed), n, keys, values)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _run(_query(name), items, True, monkeypatch)[0] == _run(_query(name), items, False, monkeypatch)[0]


def test_several_solutions_in_two_buckets_come_in_the_chains_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the nested order would get wrong: ?o holds two :a and two :b solutions,
    entered a, b, a, b; a :c solution then joins them as the chain's memory holds them
    (a1 b1, a2 b1, a1 b2, a2 b2), not a1 b1, a1 b2, a2 b1, a2 b2."""
    o = f"<{EX}o>"
    items = [(1000, (o, f"<{EX}a>", f"<{EX}a1>")), (1000, (o, f"<{EX}b>", f"<{EX}b1>")),
             (1000, (o, f"<{EX}a>", f"<{EX}a2>")), (1000, (o, f"<{EX}b>", f"<{EX}b2>")),
             (2000, (o, f"<{EX}c>", f"<{EX}c1>"))]
    query = HEAD.format(select="?x ?y", where="?o :a ?x ; :b ?y ; :c ?z", tail="")
    ours, _ = _run(query, items, True, monkeypatch)
    assert ours == _run(query, items, False, monkeypatch)[0]
    last = [(row["x"][-3:-1], row["y"][-3:-1]) for row in ours[0]["rows"]]
    assert last == [("a1", "b1"), ("a2", "b1"), ("a1", "b2"), ("a2", "b2")]


def test_prefix_order() -> None:
    """``_prefix`` on cells ``[weight, stamp, part]``: by the latest stamp, then the shorter
    prefix's order, then the last bucket's."""
    a1, a2 = [1, 0, ("a1",)], [1, 2, ("a2",)]
    b1, b2 = [1, 1, ("b1",)], [1, 3, ("b2",)]
    got = [tuple(cell[2][0] for cell in combination) for combination in _prefix([[a1, a2], [b1, b2]])]
    assert got == [("a1", "b1"), ("a2", "b1"), ("a1", "b2"), ("a2", "b2")]


def test_explain_and_where_no_star_is_made() -> None:
    lines = InstanceEvaluator(_query("a star, then a join")).network.describe()
    assert lines[1].strip() == "star join on ?o (3 inputs, one memory)"
    # two patterns: one join node; patterns sharing two variables: join nodes
    for where in ("?o :a ?x ; :b ?y", "?o :a ?x . ?o :b ?x . ?o :c ?z"):
        network = InstanceEvaluator(HEAD.format(select="*", where=where, tail="")).network
        assert isinstance(network.root, JoinNode) and _star_of(network) is None
