"""The simulator's payload formats: what real devices publish, byte for byte, from the same readings."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from edgewave.firmware_sim.cli import main
from edgewave.firmware_sim.config import SimConfigError, load_config
from edgewave.firmware_sim.fleet import build_sites, to_message
from edgewave.firmware_sim.observation import Reading
from edgewave.firmware_sim.payload_formats import FORMATS, to_format_message
from edgewave.firmware_sim.recording import parse_messages, write_messages
from edgewave.firmware_sim.scenario import load_scenario
from edgewave.firmware_sim.simulation import Simulation
from edgewave.shared.recorded import read_recorded

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "sim.yaml"
FIRE = REPO / "configs" / "scenarios" / "fire-room3.yaml"
MS = 1767600128250          # 2026-01-05T08:02:08.250Z
DEVICE_KINDS = ("temperature", "humidity", "co2", "smoke", "motion", "door")


@pytest.fixture(scope="module")
def site():
    return build_sites(load_config(CONFIG), ["gw1"])[0]


def message(site, local: str, value, fmt: str, confidence: float | None = None):
    return to_format_message(Reading(MS, site.sensor(local), value, confidence), fmt)


# (format, sensor, value) -> (topic, payload); room3 and room6 are ACME sensors, room1 plain SOSA
EXPECTED = {
    ("zigbee2mqtt", "room3-temperature", 63.5):
        ("zigbee2mqtt/room3-temperature", b'{"temperature":63.5,"battery":78,"linkquality":139}'),
    ("zigbee2mqtt", "room1-humidity", 41.5):
        ("zigbee2mqtt/room1-humidity", b'{"humidity":41.5,"battery":73,"linkquality":83}'),
    ("zigbee2mqtt", "room1-co2", 2480.0): ("zigbee2mqtt/room1-co2", b'{"co2":2480.0,"battery":63,"linkquality":185}'),
    ("zigbee2mqtt", "room3-smoke", True): ("zigbee2mqtt/room3-smoke", b'{"smoke":true,"battery":97,"linkquality":132}'),
    ("zigbee2mqtt", "room1-motion", False):
        ("zigbee2mqtt/room1-motion", b'{"occupancy":false,"battery":87,"linkquality":141}'),
    ("zigbee2mqtt", "room1-door", "open"):
        ("zigbee2mqtt/room1-door", b'{"contact":false,"battery":98,"linkquality":111}'),
    ("zigbee2mqtt", "room6-door", "closed"):
        ("zigbee2mqtt/room6-door", b'{"contact":true,"battery":77,"linkquality":78}'),
    ("tasmota", "room3-temperature", 63.5):
        ("tele/room3-temperature/SENSOR",
         b'{"Time":"2026-01-05T08:02:08","AM2301":{"Temperature":63.5},"TempUnit":"C"}'),
    ("tasmota", "room1-humidity", 41.5):
        ("tele/room1-humidity/SENSOR", b'{"Time":"2026-01-05T08:02:08","AM2301":{"Humidity":41.5},"TempUnit":"C"}'),
    ("tasmota", "room1-co2", 2480.0):
        ("tele/room1-co2/SENSOR", b'{"Time":"2026-01-05T08:02:08","MHZ19B":{"CarbonDioxide":2480.0}}'),
    ("esphome", "room3-temperature", 63.5): ("room3-temperature/sensor/temperature/state", b"63.5"),
    ("esphome", "room1-temperature", 21.0): ("room1-temperature/sensor/temperature/state", b"21"),
    ("esphome", "room1-humidity", 41.5): ("room1-humidity/sensor/humidity/state", b"41.5"),
    ("esphome", "room1-co2", 2480.0): ("room1-co2/sensor/co2/state", b"2480"),
    ("esphome", "room3-smoke", True): ("room3-smoke/binary_sensor/smoke/state", b"ON"),
    ("esphome", "room1-motion", False): ("room1-motion/binary_sensor/motion/state", b"OFF"),
    ("esphome", "room1-door", "open"): ("room1-door/binary_sensor/door/state", b"ON"),
    ("esphome", "room6-door", "closed"): ("room6-door/binary_sensor/door/state", b"OFF"),
    ("senml", "room3-temperature", 63.5):
        ("senml/room3-temperature",
         b'[{"bn":"urn:dev:ew:room3-temperature:","bt":1767600128.25,"n":"temperature","u":"Cel","v":63.5}]'),
    ("senml", "room1-humidity", 41.5):
        ("senml/room1-humidity",
         b'[{"bn":"urn:dev:ew:room1-humidity:","bt":1767600128.25,"n":"humidity","u":"%RH","v":41.5}]'),
    ("senml", "room1-co2", 2480.0):
        ("senml/room1-co2", b'[{"bn":"urn:dev:ew:room1-co2:","bt":1767600128.25,"n":"co2","u":"ppm","v":2480.0}]'),
    ("senml", "room3-smoke", True):
        ("senml/room3-smoke", b'[{"bn":"urn:dev:ew:room3-smoke:","bt":1767600128.25,"n":"smoke","vb":true}]'),
    ("senml", "room1-motion", False):
        ("senml/room1-motion", b'[{"bn":"urn:dev:ew:room1-motion:","bt":1767600128.25,"n":"motion","vb":false}]'),
    ("senml", "room6-door", "closed"):
        ("senml/room6-door", b'[{"bn":"urn:dev:ew:room6-door:","bt":1767600128.25,"n":"door","vs":"closed"}]'),
}


@pytest.mark.parametrize("fmt,local,value", sorted(EXPECTED, key=str), ids=lambda x: str(x))
def test_device_topic_and_payload_byte_for_byte(site, fmt: str, local: str, value) -> None:
    msg = message(site, local, value, fmt)
    assert (msg.topic, msg.payload) == EXPECTED[(fmt, local, value)]
    assert msg.lines == () and msg.ms == MS and msg.gateway == "gw1"


def test_every_device_kind_in_every_format_has_a_payload_except_tasmota_switches(site) -> None:
    for fmt in ("zigbee2mqtt", "tasmota", "esphome", "senml"):
        for kind in DEVICE_KINDS:
            value = {"smoke": True, "motion": True, "door": "open"}.get(kind, 20.5)
            msg = message(site, f"room2-{kind}", value, fmt)
            if fmt == "tasmota" and kind in ("smoke", "motion", "door"):
                assert msg == to_message(Reading(MS, site.sensor(f"room2-{kind}"), value))
            else:
                assert msg.body is not None and not msg.topic.startswith("ew/in/"), (fmt, kind)
                if fmt != "esphome":
                    json.loads(msg.body)


def test_kinds_no_device_format_says_stay_ntriples(site) -> None:
    """Vital signs with their confidence and locations: N-Triples on ew/in/... in every format."""
    readings = [Reading(MS, site.sensor("rut-heart_rate"), 120.0, 0.93),
                Reading(MS, site.sensor("olle-breathing_rate"), 8.0, 0.9),
                Reading(MS, site.sensor("rut-spo2"), 97.0, 0.88),
                Reading(MS, site.sensor("alice-location"), (60.19, 24.88))]
    for fmt in FORMATS:
        for reading in readings:
            msg = to_format_message(reading, fmt)
            assert msg == to_message(reading) and msg.body is None
            assert msg.topic.startswith("ew/in/")


def test_the_dialect_does_not_change_a_device_payload(site) -> None:
    """room3 has ACME sensors, room1 plain SOSA: the same payload apart from the device name."""
    for fmt in ("zigbee2mqtt", "tasmota", "esphome", "senml"):
        acme = message(site, "room3-co2", 700.0, fmt)
        sosa = message(site, "room1-co2", 700.0, fmt)
        assert acme.topic.replace("room3", "room1") == sosa.topic
        if fmt == "zigbee2mqtt":   # battery and link quality are the device's own
            assert json.loads(acme.body)["co2"] == json.loads(sosa.body)["co2"] == 700.0
        else:
            assert acme.body.replace(b"room3", b"room1") == sosa.body


def test_battery_is_fixed_per_sensor_and_link_quality_plausible(site) -> None:
    for local in ("room1-temperature", "room5-door", "room7-smoke"):
        bodies = [json.loads(message(site, local, 20.0 if "temp" in local else True, "zigbee2mqtt").body)]
        bodies += [json.loads(to_format_message(Reading(MS + 10_000 * i, site.sensor(local),
                                                        20.0 if "temp" in local else True), "zigbee2mqtt").body)
                   for i in range(1, 30)]
        assert len({b["battery"] for b in bodies}) == 1 and 60 <= bodies[0]["battery"] <= 100
        assert all(isinstance(b["linkquality"], int) and 0 <= b["linkquality"] <= 255 for b in bodies)
        assert len({b["linkquality"] for b in bodies}) > 1


def run_messages(fmt: str, seconds: float = 240):
    config = load_config(CONFIG, payload_format=fmt)
    sim = Simulation(config, load_scenario(FIRE), duration_s=seconds, keep_readings=True)
    messages = list(sim.messages())
    return sim, messages


def test_same_readings_order_times_and_truth_in_every_format() -> None:
    base, base_messages = run_messages("ntriples")
    base_truth = [row.to_json(base.config.start_ms, "fire") for row in base.truth()]
    assert base_truth, "the fire scenario has matches"
    for fmt in ("senml", "zigbee2mqtt", "tasmota", "esphome"):
        sim, messages = run_messages(fmt)
        assert sim.readings == base.readings, fmt
        assert [(m.ms, m.gateway) for m in messages] == [(m.ms, m.gateway) for m in base_messages], fmt
        assert [row.to_json(sim.config.start_ms, "fire") for row in sim.truth()] == base_truth, fmt
        devices = [m for m in messages if m.body is not None]
        assert devices and len(devices) < len(messages), fmt   # vital signs and locations stay N-Triples
        for msg, reading in zip(messages, sim.readings):
            assert msg.body is None or reading.sensor.local in msg.topic


def test_the_config_format_and_the_flag(tmp_path: Path) -> None:
    assert load_config(CONFIG).format == "ntriples"
    assert load_config(None).format == "ntriples"
    config = tmp_path / "sim.yaml"
    config.write_text("format: esphome\nduration_s: 30\n")
    assert load_config(config).format == "esphome"
    assert load_config(config, payload_format="senml").format == "senml"
    config.write_text("format: json\n")
    with pytest.raises(SimConfigError, match="format"):
        load_config(config)


def test_record_with_a_format_and_its_recording_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "z2m.tsv"
    assert main(["--log-level", "WARNING", "record", "--config", str(CONFIG), "--gateway", "gw1",
                 "--duration", "60", "--format", "zigbee2mqtt", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    payload_lines = [line for line in text.splitlines() if line.startswith("# ew:payload topic=zigbee2mqtt/")]
    assert payload_lines and payload_lines[0].split(" ", 5)[4].startswith("ms=")
    # The engine's reader sees the N-Triples messages only (vital signs, locations).
    assert all("/health/" in line or "/location/" in line
               for line in text.splitlines() if line.startswith("# ew:message"))
    assert list(read_recorded(text.splitlines()))
    # Replay reads back exactly what was published.
    _, messages = run_messages("zigbee2mqtt", 60)
    gw1 = [m for m in messages if m.gateway == "gw1"]
    replayed = list(parse_messages(text.splitlines(keepends=True)))
    assert [(m.ms, m.topic, m.payload) for m in replayed] == [(m.ms, m.topic, m.payload) for m in gw1]


def test_recording_payload_lines_survive_and_bad_ones_are_skipped() -> None:
    buf = io.StringIO()
    _, messages = run_messages("senml", 30)
    write_messages(buf, messages)
    assert list(parse_messages(buf.getvalue().splitlines(keepends=True))) == messages
    errors: list[str] = []
    bad = ["# ew:payload topic=senml/x gateway=gw1 ms=12\n",           # no payload
           "# ew:payload topic=senml/x gateway=gw1 ms=20 \udcff\n",    # not UTF-8 (surrogate-escaped)
           "# ew:payload topic=senml/x gateway=gw1 ms=30 [1]\n",
           "# ew:payload topic=senml/x gateway=gw1 ms=25 [2]\n"]       # goes back in time
    got = list(parse_messages(bad, errors=errors))
    assert [(m.ms, m.payload) for m in got] == [(30, b"[1]")]
    assert len(errors) == 3


def test_stdout_run_in_a_device_format(capsys) -> None:
    assert main(["--log-level", "WARNING", "run", "--config", str(CONFIG), "--gateway", "gw1", "--duration", "20",
                 "--speed", "max", "--stdout", "--format", "esphome"]) == 0
    out = capsys.readouterr().out
    assert "# ew:payload topic=room1-temperature/sensor/temperature/state gateway=gw1 ms=" in out


def test_an_unknown_format_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--format", "xml", "--stdout"])
    assert exc.value.code == 2
    assert "--format" in capsys.readouterr().err


def test_run_warns_when_gateways_share_a_broker_in_a_device_format(caplog) -> None:
    from edgewave.firmware_sim.cli import _warn_shared_device_topics

    for fmt, warned in (("zigbee2mqtt", True), ("ntriples", False)):
        config = load_config(CONFIG, payload_format=fmt)
        sim = Simulation(config, duration_s=1)
        caplog.clear()
        with caplog.at_level("WARNING", logger="edgewave.firmware_sim"):
            _warn_shared_device_topics(sim, {gw.id: gw.broker for gw in config.gateways})
        assert ("device_topics_shared" in caplog.text) == warned, fmt
    one = Simulation(load_config(CONFIG, payload_format="senml"), gateways=["gw1"], duration_s=1)
    caplog.clear()
    _warn_shared_device_topics(one, {gw.id: gw.broker for gw in one.config.gateways})
    assert "device_topics_shared" not in caplog.text
