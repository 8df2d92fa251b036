"""The simulated stream: repeatable, realistic within documented bounds, scalable by flags."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from edgewave.agent.engine.per_instance import InstanceQuery, parse_for_evaluation
from edgewave.firmware_sim.cli import main
from edgewave.firmware_sim.clock import Pacer, parse_speed
from edgewave.firmware_sim.config import SimConfigError, load_config
from edgewave.firmware_sim.sensors import KINDS
from edgewave.firmware_sim.simulation import Simulation
from edgewave.firmware_sim.truth import WINDOW_MS, background_hazards
from edgewave.shared.recorded import read_recorded

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
DECIMAL = re.compile(r'<http://www.w3.org/ns/sosa/hasSimpleResult> "([0-9.\-]+)"\^\^')


def record(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    assert main(["--log-level", "WARNING", "record", "--config", str(CONFIG), "--out", str(out), *extra]) == 0
    return out


def test_same_seed_same_stream_other_seed_other_stream(tmp_path: Path) -> None:
    a = record(tmp_path, "a.tsv", "--duration", "120")
    b = record(tmp_path, "b.tsv", "--duration", "120")
    c = record(tmp_path, "c.tsv", "--duration", "120", "--seed", "7")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    # A recording is a plain recorded stream (docs/ARCHITECTURE.md): the shared reader takes it whole.
    items = list(read_recorded(a.read_text().splitlines()))
    assert len(items) > 1000
    assert [ts for ts, _ in items] == sorted(ts for ts, _ in items)


def test_one_gateway_is_the_same_alone_or_in_the_fleet(tmp_path: Path) -> None:
    both = record(tmp_path, "both.tsv", "--duration", "60").read_text().splitlines()
    alone = record(tmp_path, "gw1.tsv", "--duration", "60", "--gateway", "gw1").read_text().splitlines()
    in_fleet = [line for line in both if "/gw1/" in line or "gateway=gw1 " in line]
    assert alone == in_fleet


def test_background_stays_in_its_safe_ranges_and_moves(tmp_path: Path) -> None:
    config = load_config(CONFIG)
    sim = Simulation(config, duration_s=3 * 3600)
    values: dict[str, list[float]] = defaultdict(list)
    confidences = []
    for message in sim.messages():
        local = message.topic.split("/")[3].split("-", 1)[1]  # gw1-room3-temperature -> room3-temperature
        kind = local.split("-", 1)[1]
        text = "\n".join(message.lines)
        m = DECIMAL.search(text) or re.search(r'<https://acme.example/ns#value> "([0-9.\-]+)"\^\^', text)
        if m and kind in KINDS and KINDS[kind].safe_range:
            values[kind].append(float(m.group(1)))
        c = re.search(r'<https://edgewave.dev/ns#confidence> "([0-9.]+)"', text)
        if c:
            confidences.append(float(c.group(1)))
    for kind, seen in values.items():
        low, high = KINDS[kind].safe_range
        assert low <= min(seen) and max(seen) <= high, kind
        assert len(set(seen)) > 3, f"{kind} never changes: {sorted(set(seen))[:5]}"
    assert set(values) == {"temperature", "humidity", "co2", "heart_rate", "breathing_rate", "spo2"}
    assert confidences and min(confidences) < 0.8 < max(confidences) <= 0.99


def test_load_flags_drive_twenty_gateways_of_fifty_sensors_at_one_message_per_second(tmp_path: Path) -> None:
    out = record(tmp_path, "load.tsv", "--gateways", "20", "--rate", "1", "--duration", "5")
    topics = Counter(re.findall(r"^# ew:message topic=(\S+)", out.read_text(), re.M))
    assert len(topics) == 20 * 50
    assert all(4 <= n <= 6 for n in topics.values())
    assert 4900 <= sum(topics.values()) <= 5100


def test_static_site_file_is_what_the_config_generates(tmp_path: Path) -> None:
    out = tmp_path / "site.nt"
    assert main(["--log-level", "WARNING", "static", "--config", str(CONFIG), "--out", str(out)]) == 0
    committed = (REPO / "configs" / "static" / "site.nt").read_text()
    assert committed.splitlines()[1:] == out.read_text().splitlines()[1:], \
        "configs/static/site.nt is stale: regenerate with edgewave-sim static --config configs/sim.yaml"
    # Thresholds patterns join against are static triples.
    assert '<http://example.org/gw1/building> <https://edgewave.dev/ns#fireTemperatureThreshold> "57"' in committed
    assert '<http://example.org/gw1/building> <https://edgewave.dev/ns#armed> "true"' in committed


def test_ground_truth_windows_are_the_patterns_windows() -> None:
    """The matches of the ground truth fit the continuous patterns' windows (a per-instance
    query's truth is per window instance instead)."""
    for path in (REPO / "configs" / "patterns").glob("*.rq"):
        query = parse_for_evaluation(path.read_text())
        assert query.name == path.stem
        if isinstance(query, InstanceQuery):
            continue
        (window,) = query.windows.values()
        assert WINDOW_MS[query.name] == window.width_ms


def test_default_site_cannot_match_in_normal_operation_but_a_low_threshold_could(tmp_path: Path) -> None:
    sim = Simulation(load_config(CONFIG), duration_s=1)
    assert all(background_hazards(site) == [] for site in sim.sites)
    low = tmp_path / "low.yaml"
    low.write_text("site: {fire_temperature_threshold: 25}\n")
    sim = Simulation(load_config(low), duration_s=1)
    assert "within normal temperatures" in background_hazards(sim.sites[0])[0]


def test_bad_config_and_bad_scenarios_are_refused_clearly(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("site: {roms: 3}\n")
    with pytest.raises(SimConfigError, match="roms"):
        load_config(bad)
    assert main(["record", "--config", str(bad), "--out", str(tmp_path / "x.tsv")]) == 2
    assert "roms" in capsys.readouterr().err

    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nevents:\n  - {kind: fire, at: 10, room: room99}\n")
    assert main(["record", "--config", str(CONFIG), "--scenario", str(scenario), "--out", str(tmp_path / "y.tsv")]) == 2
    assert "room99" in capsys.readouterr().err

    # Smoke and heat exactly one window apart: a ground truth must not hinge on the boundary.
    scenario.write_text("name: s\nevents:\n  - {kind: fire, at: 10, room: room2, smoke: [0], temperature: [[60, 70]]}\n")
    assert main(["record", "--config", str(CONFIG), "--scenario", str(scenario), "--out", str(tmp_path / "z.tsv"),
                 "--truth", str(tmp_path / "z.jsonl")]) == 2
    assert "window" in capsys.readouterr().err


def test_pacer_keeps_absolute_deadlines() -> None:
    now = [100.0]
    slept = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        now[0] += seconds + 0.002  # every sleep oversleeps by 2 ms

    pacer = Pacer(10.0, monotonic=lambda: now[0], sleep=sleep)
    for ms in (0, 1000, 2000, 2000, 3000):
        pacer.wait(ms)
    # 1 s of stream = 0.1 s at speed 10; oversleeping does not accumulate.
    assert slept == [0.1, 0.098, 0.098]
    assert parse_speed("max") is None and parse_speed("10") == 10.0
    with pytest.raises(ValueError):
        parse_speed("fast-ish")
