"""`edgewave-sim run --format X` against a real Mosquitto: a subscriber to every topic gets exactly
the device payloads (and the N-Triples of the kinds a format cannot say) the simulation computes,
in order, with the simulator's QoS and no retain flag."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgewave.firmware_sim.config import load_config
from edgewave.firmware_sim.simulation import Simulation
from test_sim_sosa import Subscriber  # same folder

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
SIM = [sys.executable, "-m", "edgewave.firmware_sim.cli"]
SECONDS = "60"

# What each format's topics look like, for the kinds it can say.
DEVICE_TOPIC = {"senml": "senml/", "zigbee2mqtt": "zigbee2mqtt/", "tasmota": "tele/", "esphome": "room"}


@pytest.mark.parametrize("fmt,by", [("senml", "flag"), ("zigbee2mqtt", "flag"), ("tasmota", "flag"),
                                    ("esphome", "config")])
def test_run_publishes_the_format_to_a_broker(mqtt_broker, tmp_path: Path, fmt: str, by: str) -> None:
    config = CONFIG
    args = ["--format", fmt]
    if by == "config":   # format: in the YAML instead of the flag
        config = tmp_path / "sim.yaml"
        config.write_text(CONFIG.read_text(encoding="utf-8") + f"\nformat: {fmt}\n", encoding="utf-8")
        args = []
    expected = [m for m in Simulation(load_config(config, payload_format=fmt), gateways=["gw1"],
                                      duration_s=float(SECONDS)).messages()]
    sub = Subscriber(mqtt_broker.host, mqtt_broker.port, topic="#", qos=2)
    try:
        done = subprocess.run(SIM + ["run", "--config", str(config), "--gateway", "gw1", "--duration", SECONDS,
                                     "--speed", "max", "--broker", f"{mqtt_broker.host}:{mqtt_broker.port}",
                                     *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"format={fmt}" in done.stderr
        sub.wait_for(len(expected), timeout_s=30)
    finally:
        sub.close()
    received = [(m.topic, m.payload) for m in sub.messages]
    assert received == [(m.topic, m.payload) for m in expected]
    assert {m.qos for m in sub.messages} == {1} and not any(m.retain for m in sub.messages)
    topics = {topic for topic, _ in received}
    assert any(t.startswith(DEVICE_TOPIC[fmt]) for t in topics)
    assert any(t.startswith("ew/in/health/gw1-") for t in topics)      # vital signs stay N-Triples
    assert any(t.startswith("ew/in/location/gw1-") for t in topics)
    assert any(t.startswith("ew/in/building/") for t in topics) == (fmt == "tasmota")


def test_a_recording_in_a_device_format_replays_byte_for_byte(mqtt_broker, tmp_path: Path) -> None:
    recording = tmp_path / "tasmota.tsv"
    subprocess.run(SIM + ["--log-level", "WARNING", "record", "--config", str(CONFIG), "--gateway", "gw1",
                          "--duration", "30", "--format", "tasmota", "--out", str(recording)], check=True)
    expected = [m for m in Simulation(load_config(CONFIG, payload_format="tasmota"), gateways=["gw1"],
                                      duration_s=30.0).messages()]
    sub = Subscriber(mqtt_broker.host, mqtt_broker.port, topic="#", qos=1)
    try:
        done = subprocess.run(SIM + ["replay", str(recording), "--speed", "max",
                                     "--broker", f"{mqtt_broker.host}:{mqtt_broker.port}"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sub.wait_for(len(expected), timeout_s=30)
    finally:
        sub.close()
    assert [(m.topic, m.payload) for m in sub.messages] == [(m.topic, m.payload) for m in expected]
    assert any(m.topic.startswith("tele/") for m in sub.messages)
