"""Sensor message decoding: whole events accepted, bad ones counted by reason, logs rate-limited."""
from __future__ import annotations

import logging

from edgewave.agent.config import settings_from_dict
from edgewave.agent.intake import (MALFORMED, OVERSIZED, UNKNOWN_STREAM, Intake, Rejection,
                                   SensorEvent)
from edgewave.shared.log_limit import LogLimiter

GOOD = b'<http://ex.org/o1> <http://ex.org/temp> "21.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .\n' \
       b'<http://ex.org/o1> <http://ex.org/by> <http://ex.org/s1> .\n'


def make(**input_settings):
    return Intake(settings_from_dict({"input": {"max_message_bytes": 512, "streams": {"fire": "http://ex.org/fire"},
                                                "default_stream": None, **input_settings}}))


def test_valid_message_becomes_one_event_on_the_mapped_stream():
    event = make().decode("ew/in/fire/s1", GOOD, 1000)
    assert isinstance(event, SensorEvent)
    assert event.stream == "<http://ex.org/fire>" and event.sensor == "s1" and event.arrival_ms == 1000
    assert event.triples[1] == ("<http://ex.org/o1>", "<http://ex.org/by>", "<http://ex.org/s1>")


def test_one_bad_line_rejects_the_whole_event():
    result = make().decode("ew/in/fire/s1", GOOD + b"<http://ex.org/o1> broken .\n", 1000)
    assert isinstance(result, Rejection) and result.reason == MALFORMED


def test_reasons():
    intake = make()
    assert intake.decode("ew/in/fire/s1", b"x" * 513, 0).reason == OVERSIZED
    assert intake.decode("ew/in/water/s1", GOOD, 0).reason == UNKNOWN_STREAM
    assert intake.decode("ew/in/fire/s1", b"\xff\xfe", 0).reason == MALFORMED
    assert intake.decode("ew/in/fire/s1", b"# only a comment\n", 0).reason == MALFORMED
    assert intake.decode("ew/in/fire", GOOD, 0).reason == MALFORMED


def test_default_stream_rule_maps_unlisted_segments():
    event = make(default_stream="urn:s:{stream}").decode("ew/in/air/s9", GOOD, 5)
    assert isinstance(event, SensorEvent) and event.stream == "<urn:s:air>"


def test_log_once_per_sensor_and_reason_per_minute(caplog):
    clock = [0.0]
    intake = Intake(settings_from_dict({"input": {"default_stream": None}}), LogLimiter(60, lambda: clock[0]))
    with caplog.at_level(logging.WARNING, logger="edgewave.agent.intake"):
        for _ in range(100):
            intake.decode("ew/in/nowhere/s1", GOOD, 0)
        intake.decode("ew/in/nowhere/s2", GOOD, 0)
        clock[0] = 61.0
        intake.decode("ew/in/nowhere/s1", GOOD, 0)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "sensor=s1" in lines[0] and "sensor=s2" in lines[1]
    assert "suppressed_since_last=99" in lines[2]


def test_one_line_per_sensor_per_minute_whatever_the_reason(caplog):
    clock = [0.0]
    intake = Intake(settings_from_dict({"input": {"default_stream": None, "max_message_bytes": 200}}),
                    LogLimiter(60, lambda: clock[0]))
    with caplog.at_level(logging.WARNING, logger="edgewave.agent.intake"):
        intake.decode("ew/in/nowhere/s1", GOOD, 0)
        intake.decode("ew/in/fire/s1", b"y" * 300, 0)
        clock[0] = 30.0
        intake.decode("ew/in/fire/s1", b"bad", 0)
    assert len(caplog.records) == 1 and "reason=unknown_stream" in caplog.records[0].getMessage()
