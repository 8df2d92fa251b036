"""How many examples a property test draws.

A property test names the examples of a thorough run: ``@settings(max_examples=examples(600))``.
``make test`` runs Hypothesis's default profile and draws half of them (at least 20):
enough for each property on every change, while the suite shares two cores with Spark,
brokers and a browser. The hypothesis profile ``thorough`` (registered in tests/conftest.py)
draws them all, e.g. before a release or after a change to the engine or a decoder:

    .venv/bin/python -m pytest --hypothesis-profile=thorough tests/unit tests/differential

Tests whose examples are derandomised draw the same first examples in both profiles, so
a failure found by a thorough run is found again by it.
"""
from __future__ import annotations

from hypothesis import settings

THOROUGH = "thorough"
SHARE = 2          # the default profile draws 1/SHARE of the thorough count
AT_LEAST = 20


def thorough() -> bool:
    return settings.get_current_profile_name() == THOROUGH


def examples(count: int) -> int:
    """``count`` under the thorough profile; half of it (at least 20) otherwise."""
    if thorough():
        return count
    return min(count, max(AT_LEAST, -(-count // SHARE)))
