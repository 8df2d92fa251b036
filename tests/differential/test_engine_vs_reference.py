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


def check(case: Case) -> bool:
    """Engine == reference for every pattern; True when the first pattern has any match."""
    found = engine_matches(case)
    nonempty = False
    for spec in case.queries:
        expected = reference_matches(spec.reference_query(), case.schema, case.static, case.stream,
                                     case.vocabulary(), entailment=case.entailment,
                                     static_removed=case.static_removed)
        got = found[spec.name]
        if spec is not case.queries[0] and case.remove_after is not None:
            # a removed pattern reports exactly the matches completed before its removal
            last = case.stream[case.remove_after - 1][1] if case.remove_after else -1
            expected = Counter({k: n for k, n in expected.items() if max(ts for _, ts in k[1]) <= last})
        if spec is case.queries[0]:
            nonempty = sum(expected.values()) > 0
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
    return nonempty


SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run_cases(strategy, examples: int, floor: float) -> None:
    """``examples`` generated cases must each equal the reference, and at least ``floor`` of
    them must have matches: cases where both sides find nothing prove little, so a generator
    that drifted towards them would leave the comparison hollow. (Measured with these seeds:
    0.32 for one pattern, 0.27 for two, 0.37 for C-SPARQL; the floors sit a little below.)"""
    nonempty: list[bool] = []

    @settings(max_examples=examples, **SETTINGS)
    @given(strategy)
    def run(case: Case) -> None:
        nonempty.append(check(case))

    run()
    share = sum(nonempty) / len(nonempty)
    assert len(nonempty) >= examples * 0.9, f"only {len(nonempty)} of {examples} cases generated"
    assert share >= floor, f"only {share:.0%} of {len(nonempty)} cases have any match (floor {floor:.0%})"


@pytest.mark.slow
def test_engine_matches_equal_the_reference():
    run_cases(cases(), 300, 0.28)


@pytest.mark.slow
def test_two_patterns_sharing_a_prefix_each_equal_the_reference():
    """Join nodes shared between patterns (even with other window widths) keep each one exact,
    also when the second pattern is removed while the stream runs."""
    run_cases(cases(queries=2), 100, 0.22)


@pytest.mark.slow
def test_csparql_patterns_also_match_static_data():
    """C-SPARQL's default window reads the static graph too (``WindowSpec.with_static``)."""
    run_cases(cases(styles=("csparql",)), 60, 0.30)
