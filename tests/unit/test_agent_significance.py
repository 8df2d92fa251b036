"""Significance filter: deadbands, maximum silence, rate limits, per-property rules from config."""
from __future__ import annotations

from edgewave.agent.config import SignificanceSettings
from edgewave.agent.significance import (BELOW_DEADBAND, FORWARD, RATE_LIMITED, SignificanceFilter,
                                         extract_observations)
from edgewave.shared.configdoc import SignificanceRule

SOSA = "http://www.w3.org/ns/sosa/"
DEC = "<http://www.w3.org/2001/XMLSchema#decimal>"
TEMP, HUM = "<http://ex.org/temperature>", "<http://ex.org/humidity>"


def obs_triples(n, value, sensor="<http://ex.org/s1>", prop=TEMP, datatype=DEC):
    o = f"<http://ex.org/obs{n}>"
    lit = f'"{value}"^^{datatype}' if datatype else f'"{value}"'
    return [(o, f"<{SOSA}madeBySensor>", sensor), (o, f"<{SOSA}observedProperty>", prop),
            (o, f"<{SOSA}hasSimpleResult>", lit), (o, "<http://ex.org/other>", "<http://ex.org/x>")]


def obs(n, value, **kw):
    (found,) = extract_observations(obs_triples(n, value, **kw))
    return found


def test_extracts_numeric_sosa_observations_only():
    found = extract_observations(obs_triples(1, 20.5) + obs_triples(2, "hot", datatype=None))
    assert [(o.subject, o.value) for o in found] == [("<http://ex.org/obs1>", 20.5)]
    assert len(found[0].triples) == 4


def test_absolute_deadband_against_last_forwarded_value():
    f = SignificanceFilter(SignificanceSettings(deadband_absolute=1.0, max_silence_s=None, max_rate_per_s=None))
    decisions = [f.decide(obs(i, v), 1000 * i) for i, v in enumerate([20.0, 20.5, 20.9, 21.0, 21.4, 19.9])]
    # 20.9 is within 1.0 of 20.0 (the last *forwarded*), 21.0 is not; 21.4 within 1.0 of 21.0.
    assert decisions == [FORWARD, BELOW_DEADBAND, BELOW_DEADBAND, FORWARD, BELOW_DEADBAND, FORWARD]


def test_relative_deadband_and_no_deadband_means_any_change():
    rel = SignificanceFilter(SignificanceSettings(deadband_relative=0.1, max_silence_s=None, max_rate_per_s=None))
    assert [rel.decide(obs(i, v), i) for i, v in enumerate([100, 105, 111])] == [FORWARD, BELOW_DEADBAND, FORWARD]
    anychange = SignificanceFilter(SignificanceSettings(max_silence_s=None, max_rate_per_s=None))
    assert [anychange.decide(obs(i, v), i) for i, v in enumerate([5, 5, 5.001])] == [FORWARD, BELOW_DEADBAND, FORWARD]


def test_max_silence_forces_a_forward():
    f = SignificanceFilter(SignificanceSettings(deadband_absolute=5, max_silence_s=10, max_rate_per_s=None))
    assert f.decide(obs(1, 20), 0) == FORWARD
    assert f.decide(obs(2, 20), 9_999) == BELOW_DEADBAND
    assert f.decide(obs(3, 20), 10_000) == FORWARD
    assert f.decide(obs(4, 20), 15_000) == BELOW_DEADBAND


def test_rate_limit_per_sensor():
    f = SignificanceFilter(SignificanceSettings(max_silence_s=None, max_rate_per_s=2))
    at_once = [f.decide(obs(i, i), 1000) for i in range(5)]
    assert at_once.count(FORWARD) == 2 and at_once.count(RATE_LIMITED) == 3
    other_sensor = obs(9, 1, sensor="<http://ex.org/s2>")
    assert f.decide(other_sensor, 1000) == FORWARD
    assert f.decide(obs(10, 100), 1500) == FORWARD       # one token back after half a second


def test_rules_per_property_override_document_default_and_yaml():
    f = SignificanceFilter(SignificanceSettings(deadband_absolute=100, max_silence_s=None, max_rate_per_s=None),
                           [SignificanceRule(None, deadband_absolute=1.0), SignificanceRule(HUM, deadband_absolute=10)])
    assert f.rule_for(TEMP).deadband_absolute == 1.0
    assert f.rule_for(HUM).deadband_absolute == 10
    assert f.decide(obs(1, 50), 0) == FORWARD and f.decide(obs(2, 52), 1) == FORWARD
    assert f.decide(obs(3, 50, prop=HUM), 0) == FORWARD and f.decide(obs(4, 55, prop=HUM), 1) == BELOW_DEADBAND


def test_changing_rules_keeps_the_last_forwarded_values():
    f = SignificanceFilter(SignificanceSettings(deadband_absolute=1.0, max_silence_s=None, max_rate_per_s=None))
    assert f.decide(obs(1, 20), 0) == FORWARD
    assert f.decide(obs(2, 20.5), 1) == BELOW_DEADBAND
    f.set_rules([SignificanceRule(TEMP, deadband_absolute=0.2)])
    assert f.decide(obs(3, 20.5), 2) == FORWARD     # measured against 20, not a fresh start
