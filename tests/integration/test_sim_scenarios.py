"""Acceptance: for each scenario, `edgewave match` over the recorded stream reports exactly
the ground truth's matches, and the ones that need entailment are missed without it.

The ground truth comes from `edgewave-sim record --truth` (computed from the injected and
background readings, not from the engine); the matches from the engine's own CLI. One
recording per gateway, as each gateway's agent sees only its own local broker.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
SCHEMA = REPO / "configs" / "schema" / "building.ttl"
STATIC = REPO / "configs" / "static" / "site.nt"
PATTERNS = sorted((REPO / "configs" / "patterns").glob("*.rq"))
SCENARIOS = sorted((REPO / "configs" / "scenarios").glob("*.yaml"))
SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli", "--log-level", "WARNING"]
MATCH = [sys.executable, "-m", "edgewave.agent.match_cli", "match"]


def record(tmp_path: Path, gateway: str, scenario: Path | None = None, duration: float | None = None):
    out = tmp_path / f"{gateway}.tsv"
    truth = tmp_path / f"{gateway}.truth.jsonl"
    args = SIM + ["record", "--config", str(CONFIG), "--gateway", gateway, "--out", str(out), "--truth", str(truth)]
    if scenario:
        args += ["--scenario", str(scenario)]
    if duration:
        args += ["--duration", str(duration)]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    rows = [json.loads(line) for line in truth.read_text().splitlines()]
    return out, rows


def match(stream: Path, *, entailment: bool = True) -> list[dict]:
    args = MATCH + ["--schema", str(SCHEMA), "--static", str(STATIC), "--stream", str(stream)]
    for pattern in PATTERNS:
        args += ["--query", str(pattern)]
    if not entailment:
        args.append("--no-entailment")
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def key(pattern: str, start: int, end: int, bindings: dict[str, str]) -> tuple:
    return (pattern, start, end, tuple(sorted(bindings.items())))


def as_reported(matches: list[dict], truth: list[dict]) -> Counter:
    """Engine matches keyed like the truth (the truth names the bindings that identify a match)."""
    names = {row["pattern"]: set(row["bindings"]) for row in truth}
    out = Counter()
    for m in matches:
        wanted = names.get(m["pattern"], set(m["bindings"]))
        out[key(m["pattern"], m["start"], m["end"], {k: v for k, v in m["bindings"].items() if k in wanted})] += 1
    return out


def expected(truth: list[dict]) -> Counter:
    return Counter(key(r["pattern"], r["start"], r["end"], r["bindings"]) for r in truth)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_engine_reports_exactly_the_ground_truth(scenario: Path, tmp_path: Path) -> None:
    entailed_total = 0
    for gateway in ("gw1", "gw2"):
        stream, truth = record(tmp_path, gateway, scenario)
        assert all(row["gateway"] == gateway for row in truth)
        # No accidental matches from background noise: every expected match was injected.
        assert not any(row["background"] for row in truth)
        got = match(stream)
        assert as_reported(got, truth) == expected(truth), f"{scenario.stem} on {gateway}"
        # Without entailment, exactly the matches that need it are missed.
        plain = [row for row in truth if not row["entailment"]]
        assert as_reported(match(stream, entailment=False), truth) == expected(plain)
        entailed_total += len(truth) - len(plain)
        if gateway == "gw1":
            assert truth, f"{scenario.stem}: the scenario injects matches on gw1"
    if scenario.stem in ("fire-room3", "intrusion", "patient-episode"):
        assert entailed_total > 0, f"{scenario.stem}: some matches must need entailment"


def test_scenarios_are_counted_as_designed(tmp_path: Path) -> None:
    """The headline numbers in the scenario files' comments, so a changed file is noticed."""
    counts = {}
    for scenario in SCENARIOS:
        for gateway in ("gw1", "gw2"):
            _, truth = record(tmp_path, gateway, scenario)
            for row in truth:
                counts[(scenario.stem, gateway, row["pattern"], row["entailment"])] = \
                    counts.get((scenario.stem, gateway, row["pattern"], row["entailment"]), 0) + 1
    assert counts == {
        ("demo", "gw1", "fire", True): 4,
        ("demo", "gw1", "fire", False): 1,
        ("fire-room3", "gw1", "fire", True): 4,
        ("fire-room3", "gw1", "fire", False): 1,
        ("friends-meeting", "gw1", "close-friends", False): 2,
        ("friends-meeting", "gw2", "close-friends", False): 1,
        ("intrusion", "gw1", "intrusion", True): 2,
        ("intrusion", "gw1", "intrusion", False): 1,
        ("patient-episode", "gw1", "abnormal-patient", True): 2,
        ("patient-episode", "gw1", "abnormal-patient", False): 1,
    }


def test_background_alone_matches_nothing(tmp_path: Path) -> None:
    """An hour of normal operation on both gateways: no pattern fires, and the truth agrees."""
    for gateway in ("gw1", "gw2"):
        stream, truth = record(tmp_path, gateway, duration=3600)
        assert truth == []
        assert match(stream) == []
