"""``InstanceEvaluator.push_many``'s loop for one window (``_push_one_window``): it calls
``advance`` only when an instance may close and appends in-order entries itself, and must
report what ``push`` reports triple by triple: with triples late or out of order, runs of
triples only timed (``(ts, n)`` items), gaps that empty the window, lateness, each report
policy, and several calls in a row (``edgewave match`` pushes in slices)."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.per_instance import InstanceEvaluator

EX = "http://ex.org/pl#"
QUERY = f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT ?t (COUNT(*) AS ?n) (SUM(?v) AS ?s)
FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP STEP_]
WHERE {{ WINDOW <urn:w> {{ ?o :value ?v ; :kind ?t }} }} GROUP BY ?t"""
NOISE = f"<{EX}noise>"


def _items(rng: random.Random, n: int) -> list:
    items, ts = [], 1_000
    for _ in range(n):
        ts += rng.choice([0, 0, 1, 300, 900, 2500, 7000])
        at = ts - rng.choice([0, 0, 0, 0, 200, 1500, 4000])  # late now and then
        o = f"<{EX}o{rng.randint(1, 6)}>"
        kind = rng.random()
        if kind < 0.2:
            items.append((at, rng.randint(1, 3)))  # a run of triples only timed
        elif kind < 0.3:
            items.append((at, (o, NOISE, f'"{rng.randint(1, 3)}"')))
        elif kind < 0.65:
            items.append((at, (o, f"<{EX}value>", f'"{rng.randint(1, 9)}"^^<http://www.w3.org/2001/XMLSchema#integer>')))
        else:
            items.append((at, (o, f"<{EX}kind>", f"<{EX}k{rng.randint(1, 2)}>")))
    return items


def _by_push(evaluator: InstanceEvaluator, items: list) -> list:
    out = []
    for ts, triple in items:
        if triple.__class__ is int:
            for i in range(triple):
                out += evaluator.push((f"<{EX}run{i}>", NOISE, f'"{i}"'), ts, "<urn:s>")
        else:
            out += evaluator.push(triple, ts, "<urn:s>")
    return out + evaluator.finish()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 120), st.sampled_from(["PT1S", "PT3S", "PT2S"]),
       st.sampled_from([0, 0, 500, 2000]), st.sampled_from(["non-empty", "window-close", "on-change", "periodic:PT2S"]),
       st.integers(1, 40))
def test_push_many_reports_what_push_reports(seed: int, n: int, step: str, lateness: int, report: str,
                                             slice_size: int) -> None:
    items = _items(random.Random(seed), n)
    query = QUERY.replace("STEP_", step)
    one = InstanceEvaluator(query, report=report, lateness_ms=lateness)
    many = InstanceEvaluator(query, report=report, lateness_ms=lateness)
    expected = _by_push(one, items)
    got: list = []
    for start in range(0, len(items), slice_size):
        many.push_many(items[start:start + slice_size], "<urn:s>", got.extend)
    got += many.finish()
    assert [r.as_json() for r in got] == [r.as_json() for r in expected]
    assert (many.triples_in, many.stream_time, many.closed_until) == \
        (one.triples_in, one.stream_time, one.closed_until)
    if not any(triple.__class__ is int for _, triple in items):
        # a run is one item: push_many may close an instance only after all its triples,
        # where push closes it between two of them and counts the second late
        assert many.late_triples == one.late_triples
    window, reference = many.windows["<urn:w>"], one.windows["<urn:w>"]
    assert (window.latest, window.start, window.end) == (reference.latest, reference.start, reference.end)


SCHEMA = [(f"<{EX}Leaf>", "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", f"<{EX}Mid>"),
          (f"<{EX}Mid>", "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", f"<{EX}Top>")]
TYPED_QUERIES = [  # rdf:type read with a variable class, with a constant one, and not at all
    f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT ?c (COUNT(*) AS ?n) FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <urn:w> {{ ?o :value ?v . ?o a ?c }} }} GROUP BY ?c""",
    f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT ?v (COUNT(*) AS ?n) FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <urn:w> {{ ?o :value ?v ; a :Top }} }} GROUP BY ?v""",
    f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT (COUNT(*) AS ?n) FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <urn:w> {{ ?o :value ?v }} }}""",
]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 80), st.sampled_from(range(len(TYPED_QUERIES))), st.booleans(),
       st.integers(1, 20))
def test_push_many_types_as_push(seed: int, n: int, query: int, schema: bool, slice_size: int) -> None:
    """rdf:type triples of classes the schema gives superclasses (a bundle), of classes it
    gives none (the triple as it is), self-typed, late: push_many as push."""
    rng = random.Random(seed)
    items, ts = [], 1_000
    for _ in range(n):
        ts += rng.choice([0, 1, 400, 1500])
        at = ts - rng.choice([0, 0, 0, 700])
        o = f"<{EX}o{rng.randint(1, 4)}>"
        if rng.random() < 0.4:
            items.append((at, (o, f"<{EX}value>", f'"{rng.randint(1, 3)}"')))
        else:
            cls = rng.choice([f"<{EX}Leaf>", f"<{EX}Mid>", f"<{EX}Top>", f"<{EX}Other>", o])
            items.append((at, (o, "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", cls)))
    triples = SCHEMA if schema else []
    one = InstanceEvaluator(TYPED_QUERIES[query], triples)
    many = InstanceEvaluator(TYPED_QUERIES[query], triples)
    expected = [r.as_json() for r in _by_push(one, items)]
    got: list = []
    for start in range(0, len(items), slice_size):
        many.push_many(items[start:start + slice_size], "<urn:s>", got.extend)
    got += many.finish()
    assert [r.as_json() for r in got] == expected
    assert (many.triples_in, many.entailed) == (one.triples_in, one.entailed)
