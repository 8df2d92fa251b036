"""The significance filter: which observations that matched no pattern are worth sending up.

INSTANS (section 4): an event is *significant* when it can change a result; in Rete
only changes in observed values are. So per (sensor, observed property) the filter
remembers the last value it let through and forwards a new one only when

- it moved by at least the deadband (absolute, or relative to that last value;
  with no deadband configured, any change counts), or
- the pair has been silent upstream for longer than ``max_silence_s`` (so the
  cloud can tell "steady" from "dead"),

and, in both cases, the sensor is under its rate limit (``max_rate_per_s``, a token
bucket per sensor). Settings come per property from the config document
(``ew:SignificanceRule``), falling back to a document-wide rule, then the YAML.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Iterable, Sequence

from edgewave.agent.config import SignificanceSettings
from edgewave.shared import vocab
from edgewave.shared.configdoc import SignificanceRule
from edgewave.shared.ntriples import literal_parts

Triple = tuple[str, str, str]

FORWARD = "forward"
BELOW_DEADBAND = "below_deadband"
RATE_LIMITED = "rate_limited"

_NUMERIC_TYPES = {vocab.XSD_INTEGER, vocab.XSD_DECIMAL, vocab.XSD_DOUBLE, vocab.XSD_LONG,
                  "<http://www.w3.org/2001/XMLSchema#float>", "<http://www.w3.org/2001/XMLSchema#int>",
                  "<http://www.w3.org/2001/XMLSchema#short>", None}
_MAX_TRACKED = 200_000


@dataclass(frozen=True)
class Observation:
    """A SOSA observation with a numeric simple result, and the triples that state it."""

    subject: str
    sensor: str
    property: str
    result: str
    value: float
    triples: tuple[Triple, ...]


def _numeric(term: str) -> float | None:
    if not term.startswith('"'):
        return None
    try:
        lexical, datatype, lang = literal_parts(term)
    except Exception:
        return None
    if lang is not None or datatype not in _NUMERIC_TYPES:
        return None
    try:
        return float(lexical)
    except ValueError:
        return None


def extract_observations(triples: Sequence[Triple]) -> list[Observation]:
    """The observations in one event: subjects with madeBySensor, observedProperty and a numeric result."""
    by_subject: dict[str, list[Triple]] = {}
    for t in triples:
        by_subject.setdefault(t[0], []).append(t)
    found = []
    for subject, own in by_subject.items():
        sensor = prop = result = None
        for _, p, o in own:
            if p == vocab.SOSA_MADE_BY_SENSOR:
                sensor = o
            elif p == vocab.SOSA_OBSERVED_PROPERTY:
                prop = o
            elif p == vocab.SOSA_HAS_SIMPLE_RESULT:
                result = o
        if sensor and prop and result:
            value = _numeric(result)
            if value is not None:
                found.append(Observation(subject, sensor, prop, result, value, tuple(own)))
    return found


@dataclass
class EffectiveRule:
    deadband_absolute: float | None
    deadband_relative: float | None
    max_silence_s: float | None
    max_rate_per_s: float | None


class _Bucket:
    __slots__ = ("tokens", "updated_ms")

    def __init__(self, tokens: float, now_ms: int) -> None:
        self.tokens = tokens
        self.updated_ms = now_ms


class SignificanceFilter:
    """Decides, per observation, whether it is significant; keeps the last forwarded values."""

    def __init__(self, defaults: SignificanceSettings, rules: Iterable[SignificanceRule] = ()) -> None:
        self.defaults = defaults
        self._last: dict[tuple[str, str], tuple[float, int]] = {}   # (sensor, prop) -> (value, ms)
        self._buckets: dict[str, _Bucket] = {}
        self.set_rules(rules)

    def set_rules(self, rules: Iterable[SignificanceRule]) -> None:
        """Replace the config document's rules in place; remembered values are kept."""
        base = EffectiveRule(self.defaults.deadband_absolute, self.defaults.deadband_relative,
                             self.defaults.max_silence_s, self.defaults.max_rate_per_s)
        rules = list(rules)
        for rule in rules:
            if rule.property is None:
                base = _overlay(base, rule)
        self._default = base
        self._per_property = {r.property: _overlay(base, r) for r in rules if r.property is not None}

    def rule_for(self, prop: str) -> EffectiveRule:
        return self._per_property.get(prop, self._default)

    def decide(self, obs: Observation, now_ms: int) -> str:
        """FORWARD (and remember it), BELOW_DEADBAND or RATE_LIMITED."""
        rule = self.rule_for(obs.property)
        key = (obs.sensor, obs.property)
        last = self._last.get(key)
        if last is not None and not self._changed(rule, last[0], obs.value):
            silent_ms = now_ms - last[1]
            if rule.max_silence_s is None or silent_ms < rule.max_silence_s * 1000:
                return BELOW_DEADBAND
        if not self._take_token(obs.sensor, rule.max_rate_per_s, now_ms):
            return RATE_LIMITED
        self._remember(key, obs.value, now_ms)
        return FORWARD

    def note_forwarded(self, obs: Observation, now_ms: int) -> None:
        """The observation went up inside a match event: it is the new reference value."""
        self._remember((obs.sensor, obs.property), obs.value, now_ms)

    @staticmethod
    def _changed(rule: EffectiveRule, last: float, value: float) -> bool:
        change = abs(value - last)
        if rule.deadband_absolute is None and rule.deadband_relative is None:
            return change > 0
        if rule.deadband_absolute is not None and change >= rule.deadband_absolute:
            return True
        if rule.deadband_relative is not None:
            if last == 0:
                return change > 0
            return change / abs(last) >= rule.deadband_relative
        return False

    def _take_token(self, sensor: str, rate: float | None, now_ms: int) -> bool:
        if not rate or rate <= 0:
            return True
        capacity = max(1.0, rate)
        bucket = self._buckets.get(sensor)
        if bucket is None:
            if len(self._buckets) > _MAX_TRACKED:
                self._buckets.clear()
            bucket = self._buckets[sensor] = _Bucket(capacity, now_ms)
        else:
            elapsed = max(0, now_ms - bucket.updated_ms) / 1000.0
            bucket.tokens = min(capacity, bucket.tokens + elapsed * rate)
            bucket.updated_ms = now_ms
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _remember(self, key: tuple[str, str], value: float, now_ms: int) -> None:
        if key not in self._last and len(self._last) > _MAX_TRACKED:
            self._last.clear()
        self._last[key] = (value, now_ms)


def _overlay(base: EffectiveRule, rule: SignificanceRule) -> EffectiveRule:
    values = {f.name: getattr(base, f.name) for f in fields(EffectiveRule)}
    for name in values:
        override = getattr(rule, name)   # SignificanceRule has every EffectiveRule field
        if override is not None:
            values[name] = override
    return EffectiveRule(**values)
