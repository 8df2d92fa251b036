"""The per-instance ground truth (co2-per-room, silent-rooms) and the scenario event that
makes a sensor go silent, on hand-made readings: what each window instance must yield."""
from __future__ import annotations

from pathlib import Path

import pytest

from edgewave.agent.engine.per_instance import InstanceQuery, parse_for_evaluation
from edgewave.firmware_sim.cli import main
from edgewave.firmware_sim.config import load_config
from edgewave.firmware_sim.fleet import build_sites
from edgewave.firmware_sim.observation import Reading
from edgewave.firmware_sim.scenario import ScenarioError, inject, scenario_from_dict
from edgewave.firmware_sim.simulation import Simulation
from edgewave.firmware_sim.truth import INSTANCE_QUERIES, INSTANCE_WINDOW_MS, average_term, instance_truth

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
QUERY_FILES = {"co2-per-room": REPO / "configs" / "patterns" / "co2-per-room.rq",
               "silent-rooms": REPO / "configs" / "scenarios" / "silent-rooms.rq"}
DEC = "<http://www.w3.org/2001/XMLSchema#decimal>"
INT = "<http://www.w3.org/2001/XMLSchema#integer>"
T0 = 1_800_000_000_000 - 1_800_000_000_000 % 60_000   # a whole minute


def test_the_truth_windows_are_the_queries_windows() -> None:
    assert set(QUERY_FILES) == set(INSTANCE_QUERIES)
    for name, path in QUERY_FILES.items():
        query = parse_for_evaluation(path.read_text())
        assert isinstance(query, InstanceQuery) and query.name == name
        (window,) = query.windows.values()
        assert window.width_ms == INSTANCE_WINDOW_MS and window.step_ms in (None, INSTANCE_WINDOW_MS)
        assert window.stream == "<http://example.org/stream/building>"


def test_average_is_exact_or_28_significant_digits() -> None:
    from decimal import Decimal
    assert average_term([Decimal(736), Decimal(736)]) == f'"736"^^{DEC}'
    assert average_term([Decimal("689"), Decimal("700")]) == f'"694.5"^^{DEC}'
    assert average_term([Decimal(700), Decimal(701), Decimal(701)]) == f'"700.6666666666666666666666667"^^{DEC}'
    assert average_term([Decimal("0.1"), Decimal("0.2")]) == f'"0.15"^^{DEC}'


def _site():
    (site,) = build_sites(load_config(CONFIG), ["gw1"])
    return site


def test_instances_are_minutes_closed_at_the_start_open_at_the_end() -> None:
    site = _site()
    co2 = {n: site.sensor(f"room{n}-co2") for n in range(1, 8)}
    readings = [Reading(T0 + 60_000 * k + 5_000, co2[n], 600.0 + n) for k in range(2) for n in range(1, 8)]
    readings += [
        Reading(T0 + 59_999, site.sensor("room1-temperature"), 21.0),   # minute 0
        Reading(T0 + 60_000, co2[2], 1000.0, event=0),                   # minute 1, its first ms
        Reading(T0 + 120_000, site.sensor("room1-temperature"), 21.0),  # minute 2: no CO2 at all
        Reading(T0 + 120_500, site.sensor("rut-heart_rate"), 71.0, 0.9),  # another stream: not counted
    ]
    readings.remove(next(r for r in readings if r.sensor == co2[5] and r.ms == T0 + 65_000))
    truth = {(i.query, i.start - T0): i for i in instance_truth([site], sorted(readings, key=lambda r: r.ms))}
    assert sorted(truth) == [(q, s) for q in ("co2-per-room", "silent-rooms") for s in (0, 60_000, 120_000)]
    minute1 = [dict(row) for row in truth[("co2-per-room", 60_000)].rows]
    assert [row["room"] for row in minute1] == [site.rooms[f"room{n}"] for n in (1, 2, 3, 4, 6, 7)]
    assert minute1[1] == {"room": site.rooms["room2"], "average": f'"801"^^{DEC}', "lowest": f'"602"^^{DEC}',
                          "highest": f'"1000"^^{DEC}', "readings": f'"2"^^{INT}'}
    assert truth[("co2-per-room", 60_000)].events == (0,)
    assert truth[("silent-rooms", 60_000)].rows == ((("room", site.rooms["room5"]),),)
    assert truth[("silent-rooms", 0)].rows == ()
    assert truth[("co2-per-room", 120_000)].rows == ()
    assert len(truth[("silent-rooms", 120_000)].rows) == 7
    # ACME rooms (3 and 6) reported: the rows need entailment; not in minute 2.
    assert truth[("co2-per-room", 0)].entailment and not truth[("co2-per-room", 120_000)].entailment
    assert truth[("co2-per-room", 0)].to_json(T0, "s")["window"] == {"start": T0, "end": T0 + 60_000}


def test_a_silence_keeps_exactly_its_sensor_quiet_for_its_time() -> None:
    config = load_config(CONFIG)
    scenario = scenario_from_dict({"name": "s", "duration_s": 180, "events": [
        {"kind": "silence", "at": 60, "sensor": "room5-co2", "for_s": 60}]})
    sim = Simulation(config, scenario, ["gw1"], keep_readings=True)
    list(sim.messages())
    start = config.start_ms
    room5 = [r.ms - start for r in sim.readings if r.sensor.local == "room5-co2"]
    assert room5 and not any(60_000 <= ms < 120_000 for ms in room5)
    assert any(ms < 60_000 for ms in room5) and any(ms >= 120_000 for ms in room5)
    silent = [i for i in sim.instance_truth() if i.query == "silent-rooms" and i.rows]
    assert [(i.start - start, i.rows, i.events) for i in silent] == \
        [(60_000, ((("room", "<http://example.org/gw1/room5>"),),), (0,))]


def test_silences_that_cannot_be_are_refused(tmp_path: Path, capsys) -> None:
    sites = build_sites(load_config(CONFIG), ["gw1"])
    for event, reason in [
        ({"kind": "silence", "at": 10, "sensor": "room5-co2", "for_s": 0}, "for_s"),
        ({"kind": "silence", "at": 10, "sensor": "room99-co2"}, "room99-co2"),
    ]:
        with pytest.raises(ScenarioError, match=reason):
            inject(scenario_from_dict({"name": "s", "events": [event]}), sites, 0)
    clash = {"name": "s", "events": [{"kind": "silence", "at": 10, "sensor": "room5-co2", "for_s": 60},
                                     {"kind": "readings", "at": 30, "sensor": "room5-co2", "values": [[0, 900]]}]}
    with pytest.raises(ScenarioError, match=r"events\[1\].*room5-co2.*events\[0\] keeps it silent"):
        inject(scenario_from_dict(clash), sites, 0)
    scenario = tmp_path / "clash.yaml"
    scenario.write_text("name: s\nevents:\n  - {kind: silence, at: 10, sensor: room5-co2}\n"
                        "  - {kind: readings, at: 30, sensor: room5-co2, values: [[0, 900]]}\n")
    assert main(["record", "--config", str(CONFIG), "--scenario", str(scenario), "--out", str(tmp_path / "x.tsv"),
                 "--instance-truth", str(tmp_path / "x.jsonl")]) == 2
    assert "keeps it silent" in capsys.readouterr().err
