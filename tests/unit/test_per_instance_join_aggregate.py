"""The join-aggregate node (``join_aggregate_node``), the bundles a type triple enters a
window as (``windows``), and the aggregate arguments read straight to a decimal
(``compiler._decimal_of_str``, ``_decimal_of_term``): each gives what the plain path
gives, to the last character and in the same order.

The engine runs as a user runs it (``InstanceEvaluator``: query text, schema, pushes,
``finish``). The reference is the same evaluator with the compiler never choosing the
join-aggregate node, fed triple by triple through ``push`` (one window entry per triple,
no bundles); the subject is the evaluator as ``edgewave match`` runs it (``push_many``,
the node chosen where the algebra allows). Reports must be equal as JSON lists.
"""
from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewave.agent import match_cli
from edgewave.agent.engine import filters
from edgewave.agent.engine.per_instance import InstanceEvaluator
from edgewave.agent.engine.per_instance import compiler as compiler_module
from edgewave.agent.engine.per_instance.aggregate_node import AggregateNode
from edgewave.agent.engine.per_instance.aggregates import Avg
from edgewave.agent.engine.per_instance.join_aggregate_node import JoinAggregateNode

EX = "http://ex.org/pi#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
SUBCLASS = "<http://www.w3.org/2000/01/rdf-schema#subClassOf>"
SCHEMA = [(f"<{EX}Leaf{i}>", SUBCLASS, f"<{EX}Mid{i % 2}>") for i in range(3)] + [
    (f"<{EX}Mid{i}>", SUBCLASS, f"<{EX}Root>") for i in range(2)]
HEAD = f"""REGISTER {{stream}} <q> AS PREFIX : <{EX}> PREFIX xsd: <{XSD}>
SELECT {{select}}
FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{{{ WINDOW <urn:w> {{{{ {{where}} }}}} }}}} {{tail}}"""
OFFERS = "?o a :Offer ; :product ?p ; :price ?v . ?p a ?t"

# (select, where, after WHERE, whether the join-aggregate node is chosen)
QUERIES = {
    "avg of a cast": ("?t (AVG(xsd:decimal(STR(?v))) AS ?avg) (COUNT(*) AS ?n)", OFFERS, "GROUP BY ?t", True),
    "every aggregate": ("?t (SUM(?v) AS ?s) (AVG(?v) AS ?a) (MIN(?v) AS ?mn) (MAX(?v) AS ?mx) "
                        "(COUNT(DISTINCT ?v) AS ?d) (GROUP_CONCAT(STR(?v)) AS ?g) (COUNT(?v) AS ?c)",
                        OFFERS, "GROUP BY ?t", True),
    "one group": ("(COUNT(*) AS ?n) (SUM(?v) AS ?s)", OFFERS, "", True),
    "having, order, limit": ("?t (SUM(?v) AS ?s)", OFFERS,
                             "GROUP BY ?t HAVING (COUNT(*) > 1) ORDER BY DESC(?s) LIMIT 3", True),
    "key on the join variable": ("?p (SUM(?v) AS ?s) (COUNT(*) AS ?n)", OFFERS, "GROUP BY ?p", True),
    "arguments from the right": ("?o (COUNT(?t) AS ?n) (GROUP_CONCAT(STR(?t)) AS ?g)",
                                 "?p a ?t . ?o :product ?p", "GROUP BY ?o", True),
    "keys from the left side": ("?t (SUM(?v) AS ?s) (AVG(xsd:decimal(STR(?v))) AS ?a) (COUNT(*) AS ?n)",
                                "{ ?p a ?t } { ?o :product ?p ; :price ?v }", "GROUP BY ?t", True),
    "keys from both sides": ("?t ?o (SUM(?v) AS ?s)", OFFERS, "GROUP BY ?t ?o", False),
    "an argument from both sides": ("?t (GROUP_CONCAT(CONCAT(STR(?v), STR(?t))) AS ?g)", OFFERS, "GROUP BY ?t", False),
    "count distinct star": ("?t (COUNT(DISTINCT *) AS ?n)", OFFERS, "GROUP BY ?t", False),
    "optional below": ("?t (COUNT(*) AS ?n)", "?o :product ?p OPTIONAL { ?p a ?t }", "GROUP BY ?t", False),
}

PRICES = ['"12.50"', '"12.5"', '"-0.000"', '"7"', '"+.25"', '"3."', '"1234567890123456789012345678.9"',
          '"99999999999999999999999999.99"', '" 4.5 "', '"abc"', '"1e3"']
DATATYPES = [f"<{XSD}decimal>", f"<{XSD}integer>", f"<{XSD}double>", f"<{EX}USD>"]


def _query(name: str, stream: str = "RSTREAM") -> str:
    select, where, tail, _ = QUERIES[name]
    return HEAD.format(stream=stream, select=select, where=where, tail=tail)


def _stream(rng: random.Random, offers: int) -> list[tuple[int, tuple]]:
    """Offers of a few products (their types re-sent with each offer, as BSBM streams
    them), prices of every kind, some offers sent twice, an offer or a typing alone."""
    items, ts = [], 1_000
    for i in range(offers):
        ts += rng.choice([0, 1, 200, 600, 1500])
        o, p = f"<{EX}o{rng.randint(1, offers // 2 + 1)}>", f"<{EX}p{rng.randint(1, 4)}>"
        lexical = rng.choice(PRICES)
        datatype = rng.choice(DATATYPES)
        price = lexical if datatype.endswith("USD>") and rng.random() < 0.2 else f"{lexical}^^{datatype}"
        if lexical.startswith('"1234') and rng.random() < 0.5:
            price = f'"{rng.randint(1, 10 ** 30)}.{rng.randint(0, 99):02d}"^^<{XSD}decimal>'
        triples = [(o, RDF_TYPE, f"<{EX}Offer>"), (o, f"<{EX}product>", p), (o, f"<{EX}price>", price),
                   (p, RDF_TYPE, f"<{EX}Leaf{rng.randint(0, 2)}>" if rng.random() < 0.9 else f"<{EX}Other>")]
        if rng.random() < 0.1:
            triples = triples[rng.randint(0, 3):][:1]
        items.extend((ts, t) for t in triples)
    return items


def _run(query: str, items: list, fused: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list, type]:
    with monkeypatch.context() as patch:
        if not fused:
            patch.setattr(compiler_module.Compiler, "join_aggregate", lambda self, *args, **kwargs: None)
        evaluator = InstanceEvaluator(query, SCHEMA)
    reported: list = []
    if fused:
        evaluator.push_many(items, "<urn:s>", reported.extend)
    else:
        for ts, triple in items:
            reported.extend(evaluator.push(triple, ts, "<urn:s>"))
    reported.extend(evaluator.finish())
    return [r.as_json() for r in reported], type(evaluator.network.root)


@pytest.mark.parametrize("name", sorted(QUERIES))
@pytest.mark.parametrize("seed", range(4))
def test_the_join_aggregate_node_reports_what_a_join_and_an_aggregate_report(
        name: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    items = _stream(random.Random(seed), 120)
    stream = ("RSTREAM", "ISTREAM", "DSTREAM", "RSTREAM")[seed]
    ours, kind = _run(_query(name, stream), items, True, monkeypatch)
    reference, reference_kind = _run(_query(name, stream), items, False, monkeypatch)
    assert reference_kind is AggregateNode
    assert kind is (JoinAggregateNode if QUERIES[name][3] else AggregateNode)
    assert ours == reference
    assert any(report["rows"] for report in ours)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(10, 80), st.sampled_from(sorted(n for n in QUERIES if QUERIES[n][3])))
def test_random_streams_give_the_same_reports(seed: int, offers: int, name: str) -> None:
    items = _stream(random.Random(seed), offers)
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _run(_query(name), items, True, monkeypatch)[0] == _run(_query(name), items, False, monkeypatch)[0]


def test_explain_names_the_node_and_its_join() -> None:
    lines = InstanceEvaluator(_query("avg of a cast"), SCHEMA).network.describe()
    assert lines[0].strip().startswith("aggregate over a join, GROUP BY 1 key(s)")
    assert "join on ?p, arguments from the left side" in lines[0]
    lines = InstanceEvaluator(_query("keys from the left side"), SCHEMA).network.describe()
    assert "join on ?p, arguments from the right side" in lines[0]


# ------------------------------------------------------------------ the arguments' fast paths

_LEXICAL = st.from_regex(r"[+-]?([0-9]{1,34}(\.[0-9]{0,12})?|\.[0-9]{1,12})\Z", fullmatch=True)

_TERMS = st.one_of(
    st.builds(lambda lex, dt: f'"{lex}"^^{dt}', st.one_of(_LEXICAL, st.sampled_from(["", " 1.5", "1.5 ", "x", "1e2"])),
              st.sampled_from(DATATYPES)),
    st.sampled_from(['"12.5"', '"12.5"@en', f"<{EX}iri>", "_:b", '"1\\"2"^^<http://x>', None]))


@settings(max_examples=300, deadline=None)
@given(_TERMS)
def test_the_argument_fast_paths_give_the_compiled_expressions_value(term) -> None:
    slots = {"v": 0}
    for tree in (("cast", XSD + "decimal", ("call", "STR", [("var", "v")])), ("var", "v")):
        fast = compiler_module._value_of(tree, slots)
        general = filters.compile_value(tree, slots)
        try:
            expected = general((term,))
        except filters.EVAL_FAILURES:
            expected = None
        got = fast((term,))
        assert type(got) is type(expected)
        assert got == expected or got != got
        if type(got) is Decimal:
            assert got.as_tuple() == expected.as_tuple()  # the exponent too: it shows in SUM's term


_NUMBERS = st.one_of(st.integers(-10 ** 30, 10 ** 30), st.decimals(allow_nan=False, allow_infinity=False, places=4),
                     st.floats(allow_nan=False, allow_infinity=False, width=32), st.just(None))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_NUMBERS, st.sampled_from([1, 1, -1, 2])), max_size=12))
def test_avg_is_the_quotient_arith_gives(changes: list) -> None:
    """``Avg.result``'s path without floats is the general one: ``_arith``'s quotient of the
    total and the count, as a term; an error (None) while the group holds one."""
    avg = Avg(False, True)
    for value, weight in changes:
        avg.add(value, weight)
    if avg.errors or avg.n == 0:
        return
    try:
        expected = filters.value_term(filters._arith("/", avg.total(), avg.n))
    except filters.EVAL_FAILURES:
        expected = None
    assert avg.result() == expected


@pytest.mark.parametrize("name", ["avg of a cast", "keys from the left side", "every aggregate"])
def test_edgewave_match_prints_what_the_plain_path_prints(name: str, tmp_path, capsys,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Through ``edgewave match``: a recorded file (read with ``only_time``, pushed with
    ``push_many``), the node chosen, against the same run with the compiler never choosing it."""
    query_file, schema_file, stream_file = tmp_path / "q.rq", tmp_path / "schema.nt", tmp_path / "s.tsv"
    query_file.write_text(_query(name))
    schema_file.write_text("".join(f"{s} {p} {o} .\n" for s, p, o in SCHEMA))
    items = _stream(random.Random(7), 150)
    noise = [(ts, (s, f"<{EX}vendor>", f"<{EX}v1>")) for ts, (s, p, o) in items if p == f"<{EX}product>"]
    lines = sorted(items + noise, key=lambda item: item[0])
    stream_file.write_text("".join(f"{ts}\t{s} {p} {o} .\n" for ts, (s, p, o) in lines))
    args = ["match", "--schema", str(schema_file), "--query", str(query_file), "--stream", str(stream_file)]
    outputs = []
    for fused in (True, False):
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(compiler_module.Compiler, "join_aggregate", lambda self, *a, **k: None)
            assert match_cli.main(args) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("\n") > 3


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-10 ** 30, 10 ** 30), st.integers(-40, 12)), min_size=1, max_size=6),
       st.booleans())
def test_avg_of_decimals_is_value_terms_quotient(numbers: list, with_int: bool) -> None:
    """AVG over decimals writes its quotient as ``filters.value_term`` does (``Avg.result``
    writes the lexical form itself where ``str`` gives it): exponents large and small, zeros."""
    state = Avg(False, True)
    for coefficient, exponent in numbers:
        state.add(Decimal(coefficient).scaleb(exponent), 1)
    if with_int:
        state.add(3, 1)
    assert state.result() == filters.value_term((state.decimal + state.exact) / state.n)
