"""The join-aggregate node (``join_aggregate_node``), the bundles a type triple enters a
window as (``windows``), and decimals summed as integers (``aggregates.scaled_decimal``):
each gives what the plain path gives, to the last character and in the same order.

The engine runs as a user runs it (``InstanceEvaluator``: query text, schema, pushes,
``finish``). The reference is the same evaluator with the compiler never choosing the
join-aggregate node, fed triple by triple through ``push`` (one window entry per triple,
no bundles); the subject is the evaluator as ``edgewave match`` runs it (``push_many``,
the node chosen where the algebra allows). Reports must be equal as JSON lists.
"""
from __future__ import annotations

import random
from decimal import Context, Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgewave.agent.engine import filters
from edgewave.agent.engine.per_instance import InstanceEvaluator
from edgewave.agent.engine.per_instance import compiler as compiler_module
from edgewave.agent.engine.per_instance.aggregate_node import AggregateNode
from edgewave.agent.engine.per_instance.aggregates import Avg, Sum, scaled_decimal
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


# ------------------------------------------------------------------ decimals as integers

_LEXICAL = st.from_regex(r"[+-]?([0-9]{1,34}(\.[0-9]{0,12})?|\.[0-9]{1,12})\Z", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LEXICAL, st.sampled_from([1, 1, 1, -1, -1, 2, -3])), max_size=30))
def test_a_sum_of_scaled_decimals_is_the_decimal_sum(changes: list) -> None:
    """Whatever the scales and lengths (past decimal's 28 digits too): the same total, to
    its exponent, as adding the Decimals, and the same SUM and AVG terms."""
    for kind in (Sum, Avg):
        scaled, plain = kind(False, True), kind(False, True)
        for lexical, weight in changes:
            scaled.add(scaled_decimal(lexical), weight)
            plain.add(Decimal(lexical), weight)
            assert str(scaled.total()) == str(plain.total())
            assert scaled.result() == plain.result()


@pytest.mark.parametrize("changes", [
    [("9000000000000000000000000000", 1), ("4000000000000000000000000001", -3)],  # the product rounds
    [("9999999999999999999999999999", 1), ("2", 1), ("2", -1)],  # the sum rounds, then goes on as decimal
    [("1.5", 1), ("0.25", 1), ("7", 2), ("1.5", -1), ("0.25", -1)],  # scales; the smaller stays
    [("12.50", 1), ("12.50", -1)],  # an emptied sum keeps its exponent, as decimal's does
])
def test_sums_where_decimal_rounds_or_rescales(changes: list) -> None:
    for kind in (Sum, Avg):
        scaled, plain = kind(False, True), kind(False, True)
        for lexical, weight in changes:
            scaled.add(scaled_decimal(lexical), weight)
            plain.add(Decimal(lexical), weight)
            assert str(scaled.total()) == str(plain.total())
            assert scaled.result() == plain.result()


def test_scaled_decimal_is_the_decimal_of_its_lexical_form() -> None:
    for lexical in ("715.37", "-0.50", "+.5", "5.", "007", "-0", "0.000", "1" * 60, "1" * 61 + ".5"):
        scaled = scaled_decimal(lexical)
        if isinstance(scaled, Decimal):
            assert len(lexical) > 60 and scaled == Decimal(lexical)
            continue
        units, exponent, text = scaled
        assert text == lexical
        with localcontext(Context(prec=100)):
            assert Decimal(units).scaleb(exponent).as_tuple()[1:] == Decimal(lexical).as_tuple()[1:]


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
        if type(got) is tuple:
            units, exponent, lexical = got
            assert type(expected) is Decimal and Decimal(lexical).as_tuple() == expected.as_tuple()
            with localcontext(Context(prec=100)):
                assert Decimal(units).scaleb(exponent) == expected
        else:
            assert type(got) is type(expected) and (got == expected or got != got)
