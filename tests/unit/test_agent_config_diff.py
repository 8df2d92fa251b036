"""Config documents judged and applied by difference against a real engine."""
from __future__ import annotations

from agent_harness import EX, FIRE, KEY, config_document, observation

from edgewave.agent.config import settings_from_dict
from edgewave.agent.reconfigure import (APPLIED, REJECTED, apply_difference, build_engine, compile_document,
                                        judge)
from edgewave.shared.configdoc import sign_envelope
from edgewave.shared.ntriples import parse

SETTINGS = settings_from_dict({"gateway": "gw1", "config": {"key": KEY}})
FIRE_STREAM = "<http://example.org/stream/fire>"
SECURITY = "<http://example.org/stream/security>"


def envelope(version, doc, key=KEY, gateway="gw1"):
    return sign_envelope(gateway, version, doc, "trig", key)


def feed(engine, payload: bytes, ts: int, stream: str) -> None:
    for t in parse(payload.decode()):
        engine.push(t, ts, stream=stream)


def test_judge_reasons_in_order():
    applied = compile_document(5, "trig", config_document(5), SETTINGS)
    key = SETTINGS.config_key()
    assert judge(envelope(6, config_document(6), key="wrong"), SETTINGS, key, applied, 5).reason == "bad signature"
    other = judge(envelope(6, config_document(6), gateway="gw2"), SETTINGS, key, applied, 5)
    assert other.status == REJECTED and "wrong gateway" in other.reason
    stale = judge(envelope(5, config_document(5, threshold=1)), SETTINGS, key, applied, 5)
    assert stale.status == REJECTED and stale.reason.startswith("stale version")
    assert judge(envelope(5, config_document(5)), SETTINGS, key, applied, 5).unchanged
    mismatch = judge(envelope(9, config_document(8)), SETTINGS, key, applied, 5)
    assert "version mismatch" in mismatch.reason
    bad = judge(envelope(9, config_document(9, patterns={"fire": FIRE.replace("SELECT", "SELEKT")})),
                SETTINGS, key, applied, 5)
    assert bad.status == REJECTED and "parse error in pattern fire at line 3 column" in bad.reason
    good = judge(envelope(9, config_document(9)), SETTINGS, key, applied, 5)
    assert good.status == APPLIED and set(good.config.patterns) == {"fire", "intrusion"}


def test_unknown_stream_is_rejected():
    strict = settings_from_dict({"gateway": "gw1", "config": {"key": KEY},
                                 "input": {"default_stream": None,
                                           "streams": {"fire": "http://example.org/stream/fire"}}})
    verdict = judge(envelope(1, config_document(1)), strict, strict.config_key(), None, None)
    assert verdict.status == REJECTED
    assert verdict.reason.startswith("unknown stream <http://example.org/stream/security> in pattern intrusion")


def test_difference_keeps_partial_matches_and_applies_thresholds():
    old = compile_document(1, "trig", config_document(1, threshold=50), SETTINGS)
    matches = []
    engine = build_engine(old, SETTINGS, matches.append)
    feed(engine, f"<{EX}ev1> <{EX}doorOpened> <{EX}door1> .".encode(), 1000, SECURITY)
    feed(engine, observation("smoke1", "s1", "smoke", 1), 1000, FIRE_STREAM)
    feed(engine, observation("temp1", "t1", "temperature", 45), 1001, FIRE_STREAM)
    assert matches == []

    new = compile_document(2, "trig", config_document(2, threshold=40), SETTINGS)
    change = apply_difference(engine, old, new)
    assert change.kept == ("fire", "intrusion") and change.added == () and change.removed == ()
    assert change.static_added == 1 and change.static_removed == 1 and not change.schema_changed
    # The lower threshold completes the waiting temperature/smoke pair at once.
    assert [m.pattern for m in matches] == ["fire"]
    feed(engine, f"<{EX}ev2> <{EX}motionIn> <{EX}room1> .\n<{EX}ev2> <{EX}seenBy> <{EX}pir1> .".encode(), 2000,
         SECURITY)
    assert [m.pattern for m in matches] == ["fire", "intrusion"]     # the door event survived the change


def test_changed_pattern_is_replaced_removed_pattern_goes():
    old = compile_document(1, "trig", config_document(1), SETTINGS)
    engine = build_engine(old, SETTINGS, lambda m: None)
    new = compile_document(2, "trig", config_document(2, patterns={"fire": FIRE.replace("PT60S", "PT30S")}), SETTINGS)
    change = apply_difference(engine, old, new)
    assert change.removed == ("fire", "intrusion") and change.added == ("fire",) and change.kept == ()
    assert engine.queries() == ["fire"]
