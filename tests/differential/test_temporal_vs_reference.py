"""The engine's temporal operators against a brute-force reference (temporal_reference.py) on
generated streams: SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL, getDURATION() and FILTERs on
what an optional part binds, with equal timestamps, overlapping groups and window edges
made likely by small values."""
from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgewave.agent.engine import Engine
from edgewave.agent.engine.rspql import parse_query

from .temporal_reference import AbsenceSpec, Spec, absence_matches, engine_key, reference_matches, triple

OPERATORS = ("SEQ", "EQUALS", "OPTIONALSEQ", "EQUALSOPTIONAL")


@st.composite
def specs(draw) -> Spec:
    count = draw(st.integers(2, 3))
    names = iter(f"v{i}" for i in range(10))
    groups = tuple(tuple((draw(st.sampled_from("ab")), next(names)) for _ in range(draw(st.integers(1, 2))))
                   for _ in range(count))
    operators = [draw(st.sampled_from(OPERATORS))]
    if count == 3:
        # an optional part may not hold another one: after OPTIONALSEQ/EQUALSOPTIONAL, the next
        # operator's left side (both groups so far) must be required
        operators.append(draw(st.sampled_from(OPERATORS[:2] if operators[0] in OPERATORS[2:] else OPERATORS)))
    variables = [v for group in groups for _, v in group]
    filter_ = draw(st.one_of(
        st.none(), st.none(),
        st.tuples(st.just("duration"), st.sampled_from(["<", "<=", ">", "="]), st.sampled_from([0, 1000, 2000])),
        st.tuples(st.just("less"), st.sampled_from(variables), st.sampled_from(variables)),
        st.tuples(st.just("unbound"), st.sampled_from(variables)),
    ))
    return Spec(groups, tuple(operators), filter_, draw(st.sampled_from([2000, 3000, 5000])))


@st.composite
def streams(draw) -> list[tuple[int, str, str, int]]:
    ts = 0
    out = []
    for _ in range(draw(st.integers(2, 10))):
        ts += draw(st.sampled_from([0, 0, 1000, 2000, 3000]))  # equal timestamps are frequent
        out.append((ts, draw(st.sampled_from("xxy")), draw(st.sampled_from("ab")), draw(st.integers(0, 2))))
    return out


def engine_matches(spec, stream) -> Counter:
    """The engine's matches of ``spec.text()`` over ``stream``, keyed as the references key theirs."""
    found: Counter = Counter()
    engine = Engine(on_match=lambda m: found.update([engine_key(m)]))
    engine.add_query(parse_query(spec.text()))
    for item in stream:
        engine.push(triple(item), item[0], stream="http://ex.org/s")
    return found


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), streams())
def test_temporal_operators_equal_the_reference(spec: Spec, stream) -> None:
    expected = reference_matches(spec, stream)
    assert engine_matches(spec, stream) == expected, (spec.text(), stream)


@st.composite
def absence_specs(draw) -> AbsenceSpec:
    names = iter(f"v{i}" for i in range(10))
    present = tuple((draw(st.sampled_from("ab")), next(names)) for _ in range(draw(st.integers(1, 2))))
    absent = tuple((draw(st.sampled_from("ab")), next(names)) for _ in range(draw(st.integers(1, 2))))
    return AbsenceSpec(present, absent, draw(st.sampled_from([1, 1000, 2000, 3000])),
                       draw(st.sampled_from([2000, 3000, 5000])))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(absence_specs(), streams())
def test_absence_equals_the_reference(spec: AbsenceSpec, stream) -> None:
    """Deadlines at a triple's time, answers exactly at a deadline, a silence per subject."""
    assert engine_matches(spec, stream) == absence_matches(spec, stream), (spec.text(), stream)


def test_the_reference_keeps_a_right_side_alone_or_joins_it_as_worked_out_by_hand() -> None:
    """The reference itself, on a case small enough to check by hand: b at 0 has nothing
    before it (alone: ?s ?v1), b at 2000 has a at 1000 before it (joined: ?s ?v0 ?v1)."""
    optional = Spec(((("a", "v0"),), (("b", "v1"),)), ("OPTIONALSEQ",), None, 3000)
    stream = [(0, "x", "b", 1), (1000, "x", "a", 0), (2000, "x", "b", 2)]
    found = reference_matches(optional, stream)
    assert sorted(dict(bindings).get("v0", "-") + dict(bindings)["v1"] for bindings, _ in found) == [
        '"0"^^<http://www.w3.org/2001/XMLSchema#integer>"2"^^<http://www.w3.org/2001/XMLSchema#integer>',
        '-"1"^^<http://www.w3.org/2001/XMLSchema#integer>']
    assert engine_matches(optional, stream) == found
