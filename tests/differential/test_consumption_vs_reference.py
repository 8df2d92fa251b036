"""The consumption strategies against a brute-force reference (consumption_reference.py) on
generated streams: unrestricted, recent and chronological, with patterns that share value
variables as well as the subject."""
from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .consumption_reference import ConsumptionSpec, consumption_matches
from .test_temporal_vs_reference import engine_matches


@st.composite
def specs(draw) -> ConsumptionSpec:
    patterns = tuple((draw(st.sampled_from("ab")), draw(st.sampled_from(["v0", "v1", "v2"])))
                     for _ in range(draw(st.integers(1, 3))))
    return ConsumptionSpec(patterns, draw(st.sampled_from(["unrestricted", "recent", "chronological"])),
                           draw(st.sampled_from([2000, 3000, 5000])))


@st.composite
def streams(draw) -> list[tuple[int, str, str, int]]:
    """Distinct timestamps: chronological's order among equal ones is the engine's (documented)."""
    ts = 0
    out = []
    for _ in range(draw(st.integers(1, 9))):
        ts += draw(st.sampled_from([1, 500, 1000, 2000]))
        out.append((ts, draw(st.sampled_from("xxy")), draw(st.sampled_from("ab")), draw(st.integers(0, 1))))
    return out


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), streams())
# one arrival read by two patterns through two alpha memories: consumed for both
@example(ConsumptionSpec((("b", "v0"), ("a", "v0"), ("a", "v1")), "chronological", 2000),
         [(1, "x", "a", 0), (2, "x", "a", 1), (3, "x", "b", 1), (4, "x", "b", 0)])
def test_consumption_strategies_equal_the_reference(spec: ConsumptionSpec, stream) -> None:
    assert engine_matches(spec, stream) == consumption_matches(spec, stream), (spec.text(), stream)
