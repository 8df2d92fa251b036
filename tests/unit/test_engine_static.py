"""Static data (3.6): joined with windows, never expired, changed at run time."""
from __future__ import annotations

from edgewave.agent.engine import Engine, parse_query

XSD_INT = "<http://www.w3.org/2001/XMLSchema#integer>"


def ex(local: str) -> str:
    return f"<http://ex.org/{local}>"


def lit(n: int) -> str:
    return f'"{n}"^^{XSD_INT}'


# A threshold is a static triple the FILTER reads: changing it must not rebuild anything.
HOT = """
PREFIX ex: <http://ex.org/>
REGISTER RSTREAM <hot> AS SELECT ?sensor ?t ?room
FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT10S STEP PT1S]
WHERE {
  WINDOW <w> { ?sensor ex:temp ?t . }
  ?sensor ex:in ?room .
  ?room ex:limit ?limit .
  FILTER(?t > ?limit)
}
"""


def engine_with(static) -> tuple[Engine, list]:
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(parse_query(HOT))
    engine.add_static(static)
    return engine, out


def test_static_triples_join_streamed_ones_and_do_not_widen_the_interval():
    engine, out = engine_with([(ex("s1"), ex("in"), ex("r1")), (ex("r1"), ex("limit"), lit(30))])
    engine.push((ex("s1"), ex("temp"), lit(35)), 1_000_000)
    assert len(out) == 1
    m = out[0]
    assert (m.start, m.end) == (1_000_000, 1_000_000)
    assert sorted(ts for _, ts in m.triples) == [-1, -1, 1_000_000]


def test_static_data_is_never_collected():
    engine, out = engine_with([(ex("s1"), ex("in"), ex("r1")), (ex("r1"), ex("limit"), lit(30))])
    engine.advance(10**12)
    engine.push((ex("s1"), ex("temp"), lit(35)), 10**12 + 1)
    assert len(out) == 1
    assert engine.stats()["static_triples"] == 2


def test_changing_a_threshold_at_run_time_takes_effect_without_rebuilding():
    engine, out = engine_with([(ex("s1"), ex("in"), ex("r1")), (ex("r1"), ex("limit"), lit(30))])
    nodes_before = dict(engine.network.nodes)
    engine.push((ex("s1"), ex("temp"), lit(25)), 1000)
    assert out == []
    engine.remove_static([(ex("r1"), ex("limit"), lit(30))])
    engine.add_static([(ex("r1"), ex("limit"), lit(20))])
    # The 25 degrees reading is still in its window: with the new limit it matches now.
    assert [m.bindings["t"] for m in out] == [lit(25)]
    engine.push((ex("s1"), ex("temp"), lit(22)), 2000)
    assert [m.bindings["t"] for m in out] == [lit(25), lit(22)]
    assert engine.network.nodes == nodes_before  # same join nodes, same objects


def test_removing_a_static_triple_removes_tokens_built_on_it():
    engine, out = engine_with([(ex("s1"), ex("in"), ex("r1")), (ex("r1"), ex("limit"), lit(30))])
    engine.push((ex("s1"), ex("temp"), lit(10)), 1000)  # a partial match on s1 in r1
    tokens = engine.stats()["tokens"]
    engine.remove_static([(ex("s1"), ex("in"), ex("r1"))])
    assert engine.stats()["tokens"] < tokens
    engine.add_static([(ex("s1"), ex("in"), ex("r2")), (ex("r2"), ex("limit"), lit(0))])
    # Only the new room can match: nothing built on the removed triple survives.
    assert [m.bindings["room"] for m in out] == [ex("r2")]
    engine.push((ex("s1"), ex("temp"), lit(50)), 2000)
    assert [m.bindings["room"] for m in out] == [ex("r2"), ex("r2")]


def test_static_data_goes_through_the_epsilon_network():
    schema = [(ex("inRoom"), "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>", ex("in"))]
    out: list = []
    engine = Engine(schema=schema, on_match=out.append)
    engine.add_query(parse_query(HOT))
    engine.add_static([(ex("s1"), ex("inRoom"), ex("r1")), (ex("r1"), ex("limit"), lit(30))])
    engine.push((ex("s1"), ex("temp"), lit(31)), 5)
    assert [m.bindings["room"] for m in out] == [ex("r1")]
    # Removing the triple removes what it entailed.
    engine.remove_static([(ex("s1"), ex("inRoom"), ex("r1"))])
    engine.push((ex("s1"), ex("temp"), lit(32)), 6)
    assert len(out) == 1


def test_an_entailed_static_triple_stays_while_another_triple_still_entails_it():
    sub = "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>"
    schema = [(ex("inRoom"), sub, ex("in")), (ex("placedIn"), sub, ex("in"))]
    out: list = []
    engine = Engine(schema=schema, on_match=out.append)
    engine.add_query(parse_query(HOT))
    engine.add_static([(ex("s1"), ex("inRoom"), ex("r1")), (ex("s1"), ex("placedIn"), ex("r1")),
                       (ex("r1"), ex("limit"), lit(30))])
    engine.remove_static([(ex("s1"), ex("inRoom"), ex("r1"))])
    engine.push((ex("s1"), ex("temp"), lit(31)), 5)
    assert len(out) == 1


def test_streamed_triples_do_not_match_static_patterns():
    engine, out = engine_with([(ex("r1"), ex("limit"), lit(30))])
    engine.push((ex("s1"), ex("in"), ex("r1")), 1)  # streamed, but the pattern is static
    engine.push((ex("s1"), ex("temp"), lit(35)), 2)
    assert out == []


def test_a_pattern_over_static_data_only_matches_when_the_data_arrives():
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(parse_query("""
        PREFIX ex: <http://ex.org/>
        REGISTER RSTREAM <rooms> AS SELECT ?s ?room WHERE { ?s ex:in ?room . ?room ex:limit ?l }
    """))
    engine.add_static([(ex("s1"), ex("in"), ex("r1"))])
    assert out == []
    engine.add_static([(ex("r1"), ex("limit"), lit(3))])
    assert [(m.bindings, m.start, m.end) for m in out] == [({"s": ex("s1"), "room": ex("r1")}, -1, -1)]
    engine.push((ex("s1"), ex("in"), ex("r1")), 5)  # streamed: not static data
    assert len(out) == 1


# Two readings of one patient, each limited by a static threshold written after the window.
PAIR = """
PREFIX ex: <http://ex.org/>
REGISTER RSTREAM <pair> AS SELECT ?p ?hr ?br
FROM NAMED WINDOW <w> ON <http://ex.org/s> [RANGE PT5M STEP PT1S]
WHERE {
  WINDOW <w> { ?h ex:hrOf ?p ; ex:hr ?hr . ?b ex:brOf ?p ; ex:br ?br . }
  ?p ex:hrLimit ?hrLimit ; ex:brLimit ?brLimit .
  FILTER(?hr > ?hrLimit)
  FILTER(?br < ?brLimit)
}
"""


def test_a_static_threshold_joins_before_the_patterns_after_it_so_its_filter_runs_early():
    """Ordinary readings stop at the filter of their own threshold: the heart-rate readings do
    not pair with every breathing-rate reading of the window first (n^2 tokens), and the
    matches are the same."""
    out: list = []
    engine = Engine(on_match=out.append)
    engine.add_query(parse_query(PAIR))
    engine.add_static([(ex("p"), ex("hrLimit"), lit(100)), (ex("p"), ex("brLimit"), lit(10))])
    readings = 100
    for n in range(readings):
        engine.push((ex(f"h{n}"), ex("hrOf"), ex("p")), n * 1000)
        engine.push((ex(f"h{n}"), ex("hr"), lit(120 if n == 50 else 70)), n * 1000)
        engine.push((ex(f"b{n}"), ex("brOf"), ex("p")), n * 1000 + 500)
        engine.push((ex(f"b{n}"), ex("br"), lit(5 if n == 60 else 15)), n * 1000 + 500)
    tokens = sum(node.token_count() for node in engine.network.nodes.values())
    assert tokens < 4 * readings, tokens
    assert [(m.bindings["hr"], m.bindings["br"]) for m in out] == [(lit(120), lit(5))]
