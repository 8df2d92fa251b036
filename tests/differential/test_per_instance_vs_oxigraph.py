"""Per-instance evaluation against Oxigraph re-evaluating every window instance from scratch.

Hypothesis generates a stream of observations (sensor, room, value), sensor typings and
``:reads`` triples (whose rdfs:domain makes their subject a sensor), static room labels, a
window (RANGE, STEP) and a query from templates that exercise the new operators: groups
with every aggregate and HAVING, groups keyed by a sensor's entailed types (the
join-aggregate node), OPTIONAL over static data, NOT EXISTS with a correlated
FILTER, MINUS, UNION, BIND with ORDER BY and LIMIT, aggregates over OPTIONAL with entailed
types, under RSTREAM, ISTREAM and DSTREAM; some triples arrive out of order, by no more than the
allowed lateness the evaluator is given. The evaluator runs as a user runs it
(``InstanceEvaluator``: query text, schema, static data, pushes, ``finish``).

The reference computes, for every instance [k*STEP, k*STEP + RANGE) from the first that can
hold the first triple, its content (the stream triples in it and their RDFS closure, worked
out here by a fixpoint of rdfs9, rdfs11 and rdfs2, independently of the epsilon-network),
loads it as the window's named graph beside the static data, and asks Oxigraph the query's
SPARQL (the RSP-QL clauses taken out, WINDOW as GRAPH). Instances with empty content are
not reported (the default policy); ISTREAM and DSTREAM are differences between consecutive
reported results. Numbers compare by datatype and value to a double's precision (Oxigraph
writes its own canonical lexical forms and keeps 18 digits of a decimal quotient).
"""
from __future__ import annotations

from collections import Counter
from decimal import Decimal

import pyoxigraph as ox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.engine.per_instance import InstanceEvaluator
from edgewave.agent.engine.rspql import split_rspql
from edgewave.shared.vocab import RDF_TYPE, RDFS_DOMAIN, RDFS_SUBCLASSOF, XSD_NS

EX = "http://example.org/pi#"
XSD = XSD_NS
SUBCLASS, DOMAIN = RDFS_SUBCLASSOF, RDFS_DOMAIN


def iri(name: str) -> str:
    return f"<{EX}{name}>"


SENSORS = [iri(f"s{i}") for i in range(3)]
ROOMS = [iri(f"r{i}") for i in range(3)]
SCHEMA = [(iri("Thermometer"), SUBCLASS, iri("Sensor")), (iri("Sensor"), SUBCLASS, iri("Device")),
          (iri("reads"), DOMAIN, iri("Sensor"))]
LATENESS_MS = 1000  # some triples arrive up to this much out of order; instances wait for them
NUMERIC = tuple(f"<{XSD}{t}>" for t in ("integer", "decimal", "double", "float"))

TEMPLATES = {
    "groups": ("?room (COUNT(*) AS ?n) (SUM(?v) AS ?sum) (AVG(?v) AS ?avg) (MIN(?v) AS ?min) (MAX(?v) AS ?max) "
               "(COUNT(DISTINCT ?s) AS ?sensors)",
               "WINDOW :w { ?o :room ?room ; :value ?v ; :sensor ?s }", "GROUP BY ?room"),
    "having": ("?s (SUM(?v) AS ?sum)", "WINDOW :w { ?o :sensor ?s ; :value ?v }", "GROUP BY ?s HAVING (COUNT(*) > 1)"),
    "optional": ("?o ?room ?label", "WINDOW :w { ?o :room ?room } OPTIONAL { ?room :label ?label }", ""),
    "not-exists": ("?o ?v", "WINDOW :w { ?o :value ?v ; :room ?room } FILTER NOT EXISTS { WINDOW :w { "
                   "?o2 :room ?room ; :value ?v2 FILTER(?v2 > ?v) } }", ""),
    "minus": ("?o", "WINDOW :w { ?o :sensor ?s MINUS { ?o :room :r0 } }", ""),
    "union": ("?x", "WINDOW :w { { ?x a :Sensor } UNION { ?x :room :r1 } }", ""),
    "bind-order": ("?o ?w", "WINDOW :w { ?o :value ?v BIND(?v + 1 AS ?w) FILTER(?w > 3) }",
                   "ORDER BY DESC(?w) ?o LIMIT 3"),
    "optional-count": ("?s (COUNT(?o) AS ?n)", "WINDOW :w { ?s a :Device OPTIONAL { ?o :sensor ?s } }", "GROUP BY ?s"),
    # the group key from one side of the join, the arguments from the other: the join-aggregate node
    "typed-groups": ("?t (COUNT(*) AS ?n) (SUM(?v) AS ?sum) (AVG(?v) AS ?avg) (MAX(?v) AS ?max)",
                     "WINDOW :w { ?o :value ?v ; :sensor ?s . ?s a ?t }", "GROUP BY ?t"),
}


@st.composite
def cases(draw):
    width = draw(st.sampled_from([1000, 2000, 3000, 5000]))
    step = draw(st.sampled_from([s for s in (500, 1000, 2000, 5000) if s <= width] + [width]))
    template = draw(st.sampled_from(sorted(TEMPLATES)))
    register = draw(st.sampled_from(["RSTREAM", "ISTREAM", "DSTREAM"]))
    ts, stream = draw(st.integers(1000, 3000)), []
    for k in range(draw(st.integers(1, 25))):
        ts += draw(st.sampled_from([0, 300, 700, 1000, 2500]))
        late = draw(st.sampled_from([0, 0, 0, 0, 400, 1000]))  # arrives out of order, within LATENESS_MS
        kind = draw(st.sampled_from(["observation", "observation", "observation", "typing", "reads"]))
        sensor = draw(st.sampled_from(SENSORS))
        obs = iri(f"o{k}")
        if kind == "observation":
            value = draw(st.integers(0, 9))
            literal = f'"{value}"^^<{XSD}integer>' if value % 4 else f'"{value}.5"^^<{XSD}decimal>'
            room = draw(st.sampled_from(ROOMS))
            stream += [(ts - late, (obs, iri("sensor"), sensor)), (ts - late, (obs, iri("room"), room)),
                       (ts - late, (obs, iri("value"), literal))]
        elif kind == "typing":
            stream.append((ts - late, (sensor, RDF_TYPE, iri("Thermometer"))))
        else:
            stream.append((ts - late, (sensor, iri("reads"), obs)))
    labelled = draw(st.sets(st.sampled_from(ROOMS)))
    static = [(room, iri("label"), f'"room {room[-2]}"') for room in sorted(labelled)]
    select, where, tail = TEMPLATES[template]
    text = (f"PREFIX : <{EX}>\nREGISTER {register} <q> AS\nSELECT {select}\n"
            f"FROM NAMED WINDOW :w ON :s [RANGE {width}ms STEP {step}ms]\nWHERE {{ {where} }} {tail}")
    return text, width, step, stream, static


def closure(triples: set) -> set:
    """RDFS rdfs2, rdfs9 and rdfs11 over SCHEMA, by fixpoint."""
    supers = {(c, d) for c, p, d in SCHEMA if p == SUBCLASS}
    domains = {(p, c) for p, q, c in SCHEMA if q == DOMAIN}
    out = set(triples)
    while True:
        added = {(s, RDF_TYPE, d) for s, p, c in out if p == RDF_TYPE for c2, d in supers if c2 == c}
        added |= {(s, RDF_TYPE, c) for s, p, o in out for p2, c in domains if p2 == p}
        if added <= out:
            return out
        out |= added


def _ox(term: str):
    if term.startswith("<"):
        return ox.NamedNode(term[1:-1])
    lexical, _, datatype = term[1:].rpartition('"')
    if datatype.startswith("^^<"):
        return ox.Literal(lexical, datatype=ox.NamedNode(datatype[3:-1]))
    return ox.Literal(lexical)


def _canonical(term: str) -> str:
    """Numbers as datatype and value, to a double's precision: XSD leaves the digits of a
    decimal division to the implementation (Oxigraph keeps 18, Python's decimal 28)."""
    if term.endswith(NUMERIC):
        lexical, _, datatype = term[1:].partition('"^^')
        return f"{float(Decimal(lexical))!r}^^{datatype}"
    return term


def oxigraph_rows(sparql: str, static: list, content: set) -> Counter:
    store = ox.Store()
    store.extend([ox.Quad(*map(_ox, t), ox.DefaultGraph()) for t in static])
    store.extend([ox.Quad(*map(_ox, t), ox.NamedNode(EX + "w")) for t in content])
    rows: Counter = Counter()
    solutions = store.query(sparql)
    variables = solutions.variables
    for solution in solutions:
        rows[frozenset((v.value, _canonical(str(solution[v]))) for v in variables if solution[v] is not None)] += 1
    return rows


def expected(text: str, width: int, step: int, stream: list, static: list) -> list[tuple[int, Counter]]:
    sparql = split_rspql(text).sparql
    first, last = min(ts for ts, _ in stream), max(ts for ts, _ in stream)
    k = max(0, (first - width) // step + 1)
    reports, previous = [], Counter()
    while k * step <= last:
        start, end = k * step, k * step + width
        content = {triple for ts, triple in stream if start <= ts < end}
        if content:
            rows = oxigraph_rows(sparql, static, closure(content))
            if "ISTREAM" in text:
                reports.append((end, rows - previous))
            elif "DSTREAM" in text:
                reports.append((end, previous - rows))
            else:
                reports.append((end, rows))
            previous = rows
        k += 1
    return reports


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.booleans())
def test_every_instance_is_what_oxigraph_computes_from_scratch(case, many: bool) -> None:
    """Triple by triple (``push``), or as ``edgewave match`` pushes them (``push_many``)."""
    text, width, step, stream, static = case
    evaluator = InstanceEvaluator(text, SCHEMA, lateness_ms=LATENESS_MS)
    evaluator.add_static(static)
    got = []
    if many:
        evaluator.push_many(stream, None, got.extend)
    else:
        for ts, triple in stream:
            got += evaluator.push(triple, ts)
    got += evaluator.finish()
    ours = [(r.end, Counter(frozenset((v, _canonical(t)) for v, t in row.items()) for row in r.rows)) for r in got]
    assert ours == expected(text, width, step, stream, static), text
    assert all(r.end - r.start == width for r in got)
    assert evaluator.late_triples == 0
