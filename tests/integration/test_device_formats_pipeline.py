"""The demo scenario in each device payload format, through real brokers, agent and ingest, lands its truth.

The simulator publishes the demo scenario's seconds 10-40 (both fires, the intrusion's door
and motion, the CO2 sensor that reports 2,480 ppm and falls silent) as Zigbee2MQTT, Tasmota,
ESPHome or SenML devices would (docs/sim.md; what a format cannot say stays N-Triples); the
gateway's document is the demo's, with the shipped mapping preset of that format added by
``make-config --mapping``. The same patterns and schema must then give exactly the ground
truth's matches, room by room, and every event the agent made must land (tests/fault_rig.py
checks both), as the N-Triples runs of test_end_to_end_faults.py do.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fault_rig import REPO, Rig, record_demo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600), pytest.mark.paced]

START_S, END_S = 10.0, 40.0
BIN = Path(sys.executable).parent


def gateway_document(work: Path, preset: str) -> Path:
    """The demo's config document (as configs/gateway-config.trig is made) with one mapping preset."""
    work.mkdir(parents=True, exist_ok=True)
    static = work / "gw1.nt"
    subprocess.run([str(BIN / "edgewave-sim"), "static", "--config", str(REPO / "configs/sim.yaml"),
                    "--gateway", "gw1", "--out", str(static)], check=True, capture_output=True, cwd=REPO)
    queries = [a for q in sorted((REPO / "configs/patterns").glob("*.rq")) for a in ("--query", str(q))]
    out = work / f"gw1-{preset}.trig"
    subprocess.run([str(BIN / "edgewave-cloud"), "make-config", "--schema", str(REPO / "configs/schema/building.ttl"),
                    "--static", str(static), *queries, "--significance", str(REPO / "configs/significance.ttl"),
                    "--alerts", str(REPO / "configs/alerts.yaml"), "--mapping", preset,
                    "--mapping-stream", "http://example.org/stream/building",
                    "--mapping-base", "http://example.org/gw1/", "--out", str(out)],
                   check=True, capture_output=True, cwd=REPO)
    return out


@pytest.mark.parametrize("payload_format", ["zigbee2mqtt", "tasmota", "esphome", "senml"])
def test_the_demo_in_a_device_format_lands_its_ground_truth(tmp_path, payload_format):
    recording = record_demo(tmp_path / "recording", payload_format).between(START_S, END_S)
    device_topics = {topic for _, topic, _ in recording.messages if not topic.startswith("ew/in/")}
    # the fire's temperature (and in every format but Tasmota its smoke) comes as the device publishes it
    assert any("room3-temperature" in topic for topic in device_topics), sorted(device_topics)
    document = gateway_document(tmp_path / "config", payload_format)
    rig = Rig(tmp_path / "run", recording, agent_settings={"config": {"bootstrap": str(document)}})
    outcome = rig.run([])
    print(outcome.summary())
    assert outcome.problems() == [], outcome.summary()
    assert sum(outcome.truth.values()) > 0 and outcome.matches == outcome.truth
    counters = rig.agent.counters()
    assert counters.get("payload_rejected", 0) == 0 and counters.get("unmapped_topic", 0) == 0, counters
