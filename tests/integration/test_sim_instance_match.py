"""The simulator's per-instance ground truth against the engine, through both real CLIs.

`edgewave-sim record --instance-truth` computes, from the readings it published, each
room's average, lowest and highest CO2 reading and their count per minute; `edgewave match`
evaluates configs/patterns/co2-per-room.rq over the same recording with the gateway's own
static data (`edgewave-sim static --gateway`). The rows must be the same, window instance by
window instance, numbers compared exactly by value (an AVG of xsd:decimals is an
xsd:decimal: "736" and "736.0" are equal, a non-terminating average has 28 significant
digits in both). The scenario (configs/scenarios/co2-per-room.yaml) makes the comparison
worth something: a room whose CO2 climbs over minutes, a meeting, ACME sensors (entailment),
a reading 1 ms before a minute boundary, and sensors that go silent, whose rooms then have
no row at all in that minute.
"""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONFIG = REPO / "configs" / "sim.yaml"
SCENARIO = REPO / "configs" / "scenarios" / "co2-per-room.yaml"
SCHEMA = REPO / "configs" / "schema" / "building.ttl"
QUERY = REPO / "configs" / "patterns" / "co2-per-room.rq"
STREAM = "http://example.org/stream/building"
XSD = "http://www.w3.org/2001/XMLSchema#"
NUMERIC = (f"<{XSD}decimal>", f"<{XSD}integer>")
MINUTE = 60_000


def _tool(name: str) -> list[str]:
    """The installed console script, or its module when the venv has no script (editable
    installs without scripts)."""
    script = BIN / name
    if script.exists():
        return [str(script)]
    module = {"edgewave-sim": "edgewave.firmware_sim.cli", "edgewave": "edgewave.agent.match_cli"}[name]
    return [sys.executable, "-m", module]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stderr}"
    return done


def recorded(tmp_path: Path, gateway: str) -> tuple[list[dict], list[dict]]:
    """(what `edgewave match` reported, the simulator's co2-per-room instance truth)."""
    sim = _tool("edgewave-sim") + ["--log-level", "WARNING"]
    stream, truth = tmp_path / f"{gateway}.rec", tmp_path / f"{gateway}.instances.jsonl"
    static = tmp_path / f"{gateway}-static.nt"
    _run(sim + ["record", "--config", str(CONFIG), "--scenario", str(SCENARIO), "--gateway", gateway,
                "--out", str(stream), "--instance-truth", str(truth)])
    _run(sim + ["static", "--config", str(CONFIG), "--gateway", gateway, "--out", str(static)])
    done = _run(_tool("edgewave") + ["match", "--schema", str(SCHEMA), "--static", str(static),
                                     "--query", str(QUERY), "--stream", f"{STREAM}={stream}"])
    reported = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    expected = [row for row in map(json.loads, truth.read_text().splitlines()) if row["query"] == "co2-per-room"]
    assert expected and all(row["gateway"] == gateway for row in expected)
    return reported, expected


def by_instance(lines: list[dict]) -> dict[tuple[int, int], list[dict]]:
    """Rows keyed by window instance, numbers as (datatype, exact value)."""
    out: dict[tuple[int, int], list[dict]] = {}
    for line in lines:
        key = (line["window"]["start"], line["window"]["end"])
        assert key not in out, f"instance {key} reported twice"
        out[key] = [{var: value(term) for var, term in row.items()} for row in line["rows"]]
    return out


def value(term: str) -> object:
    """A numeric literal as (datatype, Decimal), so "736" equals "736.0"; other terms as they are."""
    lexical, _, datatype = term.rpartition("^^")
    if datatype in NUMERIC:
        return datatype, Decimal(lexical.strip('"'))
    return term


def room(iri: str) -> str:
    return iri.rstrip(">").rsplit("/", 1)[1]


@pytest.mark.parametrize("gateway", ["gw1", "gw2"])
def test_engine_rows_equal_the_simulators_instance_truth(tmp_path: Path, gateway: str) -> None:
    reported, expected = recorded(tmp_path, gateway)
    assert all(line["query"] == "co2-per-room" and line["stream"] == "RSTREAM" for line in reported)
    got, want = by_instance(reported), by_instance(expected)
    start = min(want)[0]
    assert start % MINUTE == 0
    # Every minute of the four-minute run, each [k*60000, (k+1)*60000) in stream ms.
    assert sorted(want) == [(start + k * MINUTE, start + (k + 1) * MINUTE) for k in range(4)]
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        assert got[key] == want[key], f"co2-per-room on {gateway} in [{key[0]}, {key[1]})"
    # The silent sensors' rooms have no row in their minutes (and only there); the others
    # report about twice a minute.
    missing = {(k[0] - start) // MINUTE: sorted({f"room{n}" for n in range(1, 8)} - {room(r["room"]) for r in rows})
               for k, rows in want.items()}
    silent = {"gw1": {1: ["room5"], 2: ["room7"]}, "gw2": {2: ["room6"], 3: ["room6"]}}[gateway]
    assert missing == {k: silent.get(k, []) for k in range(4)}


def test_the_scenario_shapes_the_aggregates(tmp_path: Path) -> None:
    """What co2-per-room.yaml promises for gw1, read off the engine's rows (equal to the truth)."""
    reported, expected = recorded(tmp_path, "gw1")
    assert by_instance(reported) == by_instance(expected)
    rows = {(k - min(by_instance(reported))[0]) // MINUTE: {room(r["room"]): r for r in rs}
            for (k, _), rs in by_instance(reported).items()}
    number = lambda row, var: row[var][1]  # noqa: E731
    # Room 1 fills up: its average rises every minute, and from minute 1 each minute's
    # lowest reading is above the highest of the minute before.
    averages = [number(rows[k]["room1"], "average") for k in range(4)]
    assert averages == sorted(averages) and len(set(averages)) == 4
    for k in range(1, 4):
        assert number(rows[k]["room1"], "lowest") > number(rows[k - 1]["room1"], "highest")
    assert number(rows[3]["room1"], "highest") == 1170
    # The meeting in room 2 in minute 2.
    assert number(rows[2]["room2"], "highest") == 1450 and number(rows[2]["room2"], "readings") == 4
    # ACME room 3 in minute 3: 2102/3, an xsd:decimal to 28 significant digits.
    assert rows[3]["room3"]["average"] == (f"<{XSD}decimal>", Decimal("700.6666666666666666666666667"))
    assert rows[3]["room3"]["readings"] == (f"<{XSD}integer>", 3)
    # Room 4's reading 1 ms before minute 3 counts in minute 2.
    assert number(rows[2]["room4"], "highest") == 900
    # Silent sensors: no row, not a row with a count of 0.
    assert "room5" not in rows[1] and "room7" not in rows[2]
