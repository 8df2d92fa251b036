"""Acceptance: for each scenario, `edgewave match` over the recorded stream reports exactly
the ground truth's matches, and the ones that need entailment are missed without it; and
the per-instance queries (co2-per-room, silent-rooms) report exactly the rows of the
instance ground truth, window instance by window instance. The queries kept beside the
scenarios (configs/scenarios/*.rq: silent-rooms, the silent-sensor absence, and the layered
alert: the hot-rooms rule and the hot-building pattern that reads what it makes) run too.

The ground truth comes from `edgewave-sim record --truth --instance-truth` (computed from
the injected and background readings, not from the engine); the results from the engine's
own CLI. One recording per gateway, as each gateway's agent sees only its own local
broker, with that gateway's part of the demo's static data (configs/static/site.nt).
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from decimal import Decimal, localcontext
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
SCHEMA = REPO / "configs" / "schema" / "building.ttl"
STATIC = REPO / "configs" / "static" / "site.nt"
PATTERNS = sorted((REPO / "configs" / "patterns").glob("*.rq"))
# Per-instance queries kept beside the scenarios (not part of the shipped gateway config).
EXTRA_QUERIES = sorted((REPO / "configs" / "scenarios").glob("*.rq"))
SCENARIOS = sorted((REPO / "configs" / "scenarios").glob("*.yaml"))
CO2_SCENARIO = REPO / "configs" / "scenarios" / "co2-per-room.yaml"
SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli", "--log-level", "WARNING"]
MATCH = [sys.executable, "-m", "edgewave.agent.match_cli", "match"]
XSD = "http://www.w3.org/2001/XMLSchema#"
HOT_ROOMS = "http://example.org/stream/hot-rooms"   # the chained rule's name (configs/scenarios/hot-rooms.rq)
# xsd:decimal division has an implementation-defined precision; edgewave's (and the
# truth's) is 28 significant digits, so averages are compared to that many.
DECIMAL_DIGITS = 28


def record(tmp_path: Path, gateway: str, scenario: Path | None = None, duration: float | None = None,
           instances: list[dict] | None = None):
    """Record a run; returns the stream and the matches' truth, and fills ``instances`` with
    the per-instance truth when a list is given."""
    out = tmp_path / f"{gateway}.tsv"
    truth = tmp_path / f"{gateway}.truth.jsonl"
    instance_truth = tmp_path / f"{gateway}.instances.jsonl"
    queries_truth = tmp_path / f"{gateway}.queries.jsonl"
    args = SIM + ["record", "--config", str(CONFIG), "--gateway", gateway, "--out", str(out), "--truth", str(truth),
                  "--query-truth", str(queries_truth)]
    if instances is not None:
        args += ["--instance-truth", str(instance_truth)]
    if scenario:
        args += ["--scenario", str(scenario)]
    if duration:
        args += ["--duration", str(duration)]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    # the shipped patterns' truth and that of the queries kept beside the scenarios: both run here
    rows = [json.loads(line) for path in (truth, queries_truth) for line in path.read_text().splitlines()]
    if instances is not None:
        instances[:] = [json.loads(line) for line in instance_truth.read_text().splitlines()]
    return out, rows


def gateway_static(tmp_path: Path, gateway: str) -> Path:
    """The gateway's own static data, as its agent has it: `edgewave-sim static --gateway`,
    which is that gateway's part of the demo's configs/static/site.nt."""
    out = tmp_path / f"{gateway}-site.nt"
    if not out.exists():
        subprocess.run(SIM + ["static", "--config", str(CONFIG), "--gateway", gateway, "--out", str(out)],
                       check=True, capture_output=True, timeout=120)
        lines = [line for line in out.read_text().splitlines() if not line.startswith("#")]
        assert lines and set(lines) <= set(STATIC.read_text().splitlines()), "configs/static/site.nt is stale"
    return out


def run_match(stream: Path, static: Path, *, entailment: bool = True) -> list[dict]:
    """Every line `edgewave match` prints: continuous matches and per-instance reports."""
    args = MATCH + ["--schema", str(SCHEMA), "--static", str(static), "--stream", str(stream)]
    for pattern in PATTERNS + EXTRA_QUERIES:
        args += ["--query", str(pattern)]
    if not entailment:
        args.append("--no-entailment")
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def match(stream: Path, static: Path, *, entailment: bool = True) -> list[dict]:
    """The continuous patterns' matches."""
    return [m for m in run_match(stream, static, entailment=entailment) if "pattern" in m]


def reported_instances(lines: list[dict]) -> dict[tuple, list]:
    """Per-instance reports keyed (query, start, end), rows with numbers made comparable."""
    out = {}
    for line in lines:
        if "query" in line:
            key = (line["query"], line["window"]["start"], line["window"]["end"])
            assert key not in out, f"{key} reported twice"
            assert line["stream"] == "RSTREAM"
            out[key] = comparable(line["rows"])
    return out


def expected_instances(truth: list[dict]) -> dict[tuple, list]:
    return {(row["query"], row["window"]["start"], row["window"]["end"]): comparable(row["rows"]) for row in truth}


def comparable(rows: list[dict]) -> list[dict]:
    """Rows with numeric literals as (datatype, value to DECIMAL_DIGITS significant digits):
    "736.0" and "736" are the same xsd:decimal; an average is as precise as the query yields."""
    out = []
    for row in rows:
        norm = {}
        for var, term in row.items():
            lexical, _, datatype = term.rpartition("^^")
            if datatype in (f"<{XSD}decimal>", f"<{XSD}integer>"):
                with localcontext() as ctx:
                    ctx.prec = DECIMAL_DIGITS
                    norm[var] = (datatype, +Decimal(lexical.strip('"')))
            else:
                norm[var] = term
        out.append(norm)
    return out


def assert_instances_equal(got: dict[tuple, list], want: dict[tuple, list], what: str) -> None:
    assert sorted(got) == sorted(want), f"{what}: instances reported {sorted(set(got) ^ set(want))} differ"
    for key in sorted(want):
        assert got[key] == want[key], f"{what}: {key[0]} in [{key[1]}, {key[2]})"


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
        instances: list[dict] = []
        stream, truth = record(tmp_path, gateway, scenario, instances=instances)
        assert all(row["gateway"] == gateway for row in truth + instances)
        # No accidental matches from background noise: every expected match was injected.
        assert not any(row["background"] for row in truth)
        static = gateway_static(tmp_path, gateway)
        lines = run_match(stream, static)
        got = [m for m in lines if "pattern" in m]
        assert as_reported(got, truth) == expected(truth), f"{scenario.stem} on {gateway}"
        assert_instances_equal(reported_instances(lines), expected_instances(instances),
                               f"{scenario.stem} on {gateway}")
        # Without entailment, exactly the matches that need it are missed.
        plain = [row for row in truth if not row["entailment"]]
        assert as_reported(match(stream, static, entailment=False), truth) == expected(plain)
        entailed_total += len(truth) - len(plain)
        if gateway == "gw1":
            assert truth or any(row["events"] for row in instances), \
                f"{scenario.stem}: the scenario injects matches or per-instance results on gw1"
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
        ("demo", "gw1", "intrusion", True): 1,
        ("demo", "gw1", "silent-sensor-in-alarm", False): 1,
        ("fire-room3", "gw1", "fire", True): 4,
        ("fire-room3", "gw1", "fire", False): 1,
        ("friends-meeting", "gw1", "close-friends", False): 2,
        ("friends-meeting", "gw2", "close-friends", False): 1,
        ("intrusion", "gw1", "intrusion", True): 2,
        ("intrusion", "gw1", "intrusion", False): 1,
        ("patient-episode", "gw1", "abnormal-patient", True): 2,
        ("patient-episode", "gw1", "abnormal-patient", False): 1,
        ("co2-per-room", "gw1", "silent-sensor", False): 2,
        ("co2-per-room", "gw2", "silent-sensor", True): 1,
        # the layered alert: the hot-rooms rule's matches (one per hot reading), and the
        # building alerts made from what it made (room 2 and room 3 hot within a minute)
        ("demo", "gw1", HOT_ROOMS, True): 2,
        ("demo", "gw1", HOT_ROOMS, False): 1,
        ("demo", "gw1", "hot-building", True): 2,
        ("fire-room3", "gw1", HOT_ROOMS, True): 2,
        ("fire-room3", "gw1", HOT_ROOMS, False): 3,
    }


def test_background_alone_matches_nothing(tmp_path: Path) -> None:
    """An hour of normal operation on both gateways: no pattern fires, and the truth agrees;
    every minute has a CO2 average for every room and no silent room."""
    for gateway in ("gw1", "gw2"):
        instances: list[dict] = []
        stream, truth = record(tmp_path, gateway, duration=3600, instances=instances)
        assert truth == []
        lines = run_match(stream, gateway_static(tmp_path, gateway))
        assert [m for m in lines if "pattern" in m] == []
        assert_instances_equal(reported_instances(lines), expected_instances(instances), f"background on {gateway}")
        assert len(instances) == 2 * 60
        assert all(len(row["rows"]) == 7 for row in instances if row["query"] == "co2-per-room")
        assert all(row["rows"] == [] for row in instances if row["query"] == "silent-rooms")


# ---- the co2-per-room scenario: per-instance aggregates ------------------------------

def test_co2_scenario_per_instance_rows_equal_the_ground_truth(tmp_path: Path) -> None:
    """co2-per-room and silent-rooms over the scenario's recordings: the engine's rows are the
    truth's, instance by instance; and the truth says what the scenario file promises."""
    silent: dict[str, list[tuple[float, str]]] = {}
    for gateway in ("gw1", "gw2"):
        instances: list[dict] = []
        stream, truth = record(tmp_path, gateway, CO2_SCENARIO, instances=instances)
        # of the continuous patterns, only the silent sensors fire: gw1's rooms 5 (60 s) and 7
        # (50 s), gw2's ACME room 6 (120 s); its 45 s timer runs from each one's last reading
        assert sorted(row["bindings"]["sensor"].rsplit("/", 1)[1].rstrip(">") for row in truth) == \
            {"gw1": ["room5-co2", "room7-co2"], "gw2": ["room6-co2"]}[gateway]
        assert all(row["pattern"] == "silent-sensor" and row["end"] - row["start"] == 45_000 for row in truth)
        static = gateway_static(tmp_path, gateway)
        got = reported_instances(run_match(stream, static))
        want = expected_instances(instances)
        assert_instances_equal(got, want, f"co2-per-room scenario on {gateway}")
        # Four minutes, both queries, minute-aligned in stream ms from the run's start.
        start = min(row["window"]["start"] for row in instances)
        assert start % 60_000 == 0
        assert sorted({(row["window"]["start"] - start, row["window"]["end"] - start) for row in instances}) == \
            [(0, 60_000), (60_000, 120_000), (120_000, 180_000), (180_000, 240_000)]
        silent[gateway] = [(row["start_s"], r["room"].rsplit("/", 1)[1].rstrip(">"))
                           for row in instances if row["query"] == "silent-rooms" for r in row["rows"]]
        if gateway == "gw1":
            by_minute = {(row["start_s"], r["room"].rsplit("/", 1)[1].rstrip(">")): r
                         for row in instances if row["query"] == "co2-per-room" for r in row["rows"]}
            number = lambda term: Decimal(term.split('"')[1])  # noqa: E731
            # The meeting in room 2: three injected readings and one background reading after.
            meeting = by_minute[(120.0, "room2")]
            assert number(meeting["readings"]) == 4 and number(meeting["highest"]) == 1450
            # ACME room 3 in minute 3: exactly the three injected readings, the first on the
            # minute's first millisecond; 2102/3 does not terminate.
            acme = by_minute[(180.0, "room3")]
            assert number(acme["readings"]) == 3
            assert number(acme["average"]) == Decimal("700.6666666666666666666666667")
            assert got[("co2-per-room", start + 180_000, start + 240_000)][2]["average"][1] == \
                Decimal("700.6666666666666666666666667")
            # Room 4's reading 1 ms before minute 3 counts in minute 2.
            assert number(by_minute[(120.0, "room4")]["highest"]) == 900
    assert silent == {"gw1": [(60.0, "room5"), (120.0, "room7")], "gw2": [(120.0, "room6"), (180.0, "room6")]}


def test_co2_scenario_without_entailment_acme_rooms_fall_silent(tmp_path: Path) -> None:
    """Without RDFS entailment the ACME rooms' readings (acme:value, sosa:madeObservation) are
    not CO2 observations to the queries: those rooms lose their rows and join the silent
    ones; every other room's rows stay what the truth says."""
    instances: list[dict] = []
    stream, _ = record(tmp_path, "gw1", CO2_SCENARIO, instances=instances)
    got = reported_instances(run_match(stream, gateway_static(tmp_path, "gw1"), entailment=False))
    acme = ["<http://example.org/gw1/room3>", "<http://example.org/gw1/room6>"]
    for row in instances:
        assert row["entailment"]   # every minute holds ACME readings
        if row["query"] == "co2-per-room":
            row["rows"] = [r for r in row["rows"] if r["room"] not in acme]
        else:
            row["rows"] = [{"room": room} for room in sorted({r["room"] for r in row["rows"]} | set(acme))]
    assert_instances_equal(got, expected_instances(instances), "co2-per-room scenario without entailment")
