"""The engine against rdflib + owlrl on random cases (see reference.py for the reasoning).

Each case is run through the public entry points exactly as a user would: the pattern is
RSP-QL text given to ``parse_query``, the schema and static data go to ``Engine``, the stream
is pushed triple by triple with its stream IRI. The engine's matches, normalised, must equal
the reference's, counted (see reference.py for why a multiset).
"""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from edgewave.agent.engine import Engine
from edgewave.agent.engine.rspql import parse_query

from .cases import Case, cases
from .reference import engine_key, reference_matches


def engine_matches(case: Case) -> dict[str, Counter]:
    """Normalised matches per pattern name, running the engine as a user would."""
    found: dict[str, Counter] = {spec.name: Counter() for spec in case.queries}
    pushing = [None]  # the timestamp being pushed: a match is emitted when its last triple arrives

    def on_match(match) -> None:
        key = engine_key(match)
        if key is None:
            return
        found[match.pattern][key] += 1
        streamed = [ts for _, ts in match.triples if ts >= 0]
        assert (match.start, match.end) == (min(streamed), max(streamed)), f"interval of {match}"
        assert match.end == pushing[0], f"{match} emitted while pushing the triple at {pushing[0]}"

    engine = Engine(schema=case.schema, entailment=case.entailment, on_match=on_match)
    for spec in case.queries:
        engine.add_query(parse_query(spec.rspql(case.iso_durations)))
    engine.add_static(case.static)
    for index, (triple, ts, stream) in enumerate(case.stream):
        if index == case.remove_after:
            for spec in case.queries[1:]:
                engine.remove_query(spec.name)
        if case.static_removed is not None and index == case.static_removed[0]:
            engine.remove_static(case.static_removed[1])
        pushing[0] = ts
        engine.push(triple, ts, stream=stream)
    return found


def describe(case: Case) -> str:
    lines = ["QUERIES:"] + [spec.rspql(case.iso_durations) for spec in case.queries] + ["SCHEMA:"]
    lines += [" ".join(t) + " ." for t in case.schema]
    lines += ["STATIC:"] + [" ".join(t) + " ." for t in case.static]
    lines += ["STREAM:"] + [f"{ts}\t{stream}\t{' '.join(t)} ." for t, ts, stream in case.stream]
    lines += [f"entailment={case.entailment} remove_after={case.remove_after} static_removed={case.static_removed}"]
    return "\n".join(lines)


def check(case: Case) -> None:
    found = engine_matches(case)
    for spec in case.queries:
        expected = reference_matches(spec.reference_query(), case.schema, case.static, case.stream,
                                     case.vocabulary(), entailment=case.entailment,
                                     static_removed=case.static_removed)
        got = found[spec.name]
        if spec is not case.queries[0] and case.remove_after is not None:
            # a removed pattern reports exactly the matches completed before its removal
            last = case.stream[case.remove_after - 1][1] if case.remove_after else -1
            expected = Counter({k: n for k, n in expected.items() if max(ts for _, ts in k[1]) <= last})
        if got != expected:
            missing = expected - got
            unexpected = got - expected

            def show(keys: Counter) -> str:
                return "\n".join(f"  {n} x {dict(b)} {list(t)}" for (b, t), n in sorted(keys.items(), key=repr)[:5])
            raise AssertionError(
                f"{describe(case)}\n"
                f"pattern {spec.name}: expected {sum(expected.values())} matches, engine gave {sum(got.values())}\n"
                f"missing or emitted too rarely ({sum(missing.values())}):\n{show(missing)}\n"
                f"unexpected or emitted too often ({sum(unexpected.values())}):\n{show(unexpected)}"
            )


SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.slow
@settings(max_examples=300, **SETTINGS)
@given(cases())
def test_engine_matches_equal_the_reference(case: Case):
    check(case)


@pytest.mark.slow
@settings(max_examples=100, **SETTINGS)
@given(cases(queries=2))
def test_two_patterns_sharing_a_prefix_each_equal_the_reference(case: Case):
    """Join nodes shared between patterns (even with other window widths) keep each one exact,
    also when the second pattern is removed while the stream runs."""
    check(case)


@pytest.mark.slow
@settings(max_examples=60, **SETTINGS)
@given(cases(styles=("csparql",)))
def test_csparql_patterns_also_match_static_data(case: Case):
    """C-SPARQL's default window reads the static graph too (``WindowSpec.with_static``)."""
    check(case)
