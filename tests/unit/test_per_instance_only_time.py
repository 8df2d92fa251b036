"""A per-instance evaluator fed runs of time-only lines (``read_recorded``'s ``only_time``)
reports what it reports when fed every triple, and counts the same triples."""
from __future__ import annotations

import random

import pytest

from edgewave.agent.engine.per_instance import InstanceEvaluator
from edgewave.shared.recorded import read_recorded

EX = "http://ex.org/"
SCHEMA = [(f"<{EX}Leaf>", "<http://www.w3.org/2000/01/rdf-schema#subClassOf>", f"<{EX}Root>"),
          (f"<{EX}alias>", "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf>", f"<{EX}v>")]
ONE_WINDOW = f"""REGISTER RSTREAM <q> AS PREFIX : <{EX}>
SELECT ?t (AVG(?v) AS ?avg) (COUNT(*) AS ?n)
FROM NAMED WINDOW <urn:w> ON <urn:s> [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW <urn:w> {{ ?s a ?t ; :v ?v }} }} GROUP BY ?t"""
TWO_WINDOWS = f"""REGISTER ISTREAM <q> AS PREFIX : <{EX}>
SELECT ?s ?v ?w
FROM NAMED WINDOW <urn:w1> ON <urn:s> [RANGE PT2S STEP PT1S]
FROM NAMED WINDOW <urn:w2> ON <urn:s> [RANGE PT5S STEP PT2S]
WHERE {{ WINDOW <urn:w1> {{ ?s :v ?v }} WINDOW <urn:w2> {{ ?s :w ?w }} }}"""


def _lines(seed: int) -> list[str]:
    rng = random.Random(seed)
    lines, ts = [], 1_000
    for _ in range(400):
        ts += rng.choice([0, 0, 0, 1, 250, 700])
        s = f"<{EX}s{rng.randint(1, 6)}>"
        p = rng.choice(["a", "v", "w", "alias", "noise", "noise", "other"])
        if p == "a":
            o = f"<{EX}{rng.choice(['Leaf', 'Root', 'Other'])}>"
        elif p in ("v", "w", "alias"):
            o = f'"{rng.randint(1, 9)}"^^<http://www.w3.org/2001/XMLSchema#integer>'
        else:
            o = rng.choice([f"<{EX}x{rng.randint(1, 3)}>", s, '"a b"', "<relative>"])
        lines.append(f"{ts}\t{s} {'<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>' if p == 'a' else f'<{EX}{p}>'}"
                     f" {o} .\n")
        if rng.random() < 0.05:
            lines.append(f"{ts - 3_000}\t{s} <{EX}noise> <{EX}late> .\n")  # time going back: an error line
    return lines


@pytest.mark.parametrize("query", [ONE_WINDOW, TWO_WINDOWS], ids=["one window", "two windows"])
@pytest.mark.parametrize("seed", range(5))
def test_runs_of_time_only_lines_report_what_every_triple_reports(query: str, seed: int) -> None:
    lines = _lines(seed)
    outcomes = []
    for timed in (False, True):
        evaluator = InstanceEvaluator(query, SCHEMA)
        errors: list = []
        items = list(read_recorded(lines, errors, evaluator.only_time("<urn:s>") if timed else None))
        assert any(isinstance(triple, int) for _, triple in items) == timed
        reported: list = []
        pushed = evaluator.push_many(items, "<urn:s>", reported.extend)
        reported.extend(evaluator.finish())
        outcomes.append(([r.as_json() for r in reported], pushed, evaluator.triples_in, evaluator.late_triples,
                         evaluator.entailed, [str(e) for e in errors]))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0]  # something was reported
