"""Sensor input: from an MQTT message to the triples of one event, or a counted rejection.

A message on ``ew/in/<stream>/<sensor>`` is one event (DESIGN.md): one or more
N-Triples lines. It is accepted whole or not at all — feeding half an event to the
engine could complete a pattern the sensor never reported. Rejections are counted by
reason and logged at most once per sensor per minute (the line says how many were
suppressed since), so a sensor stuck in a loop of bad output cannot flood the log or
stop the agent.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from edgewave.agent.config import AgentSettings
from edgewave.shared import ntriples
from edgewave.shared.topics import TopicError, parse_sensor_topic

log = logging.getLogger("edgewave.agent.intake")

Triple = tuple[str, str, str]

MALFORMED = "malformed"
OVERSIZED = "oversized"
UNKNOWN_STREAM = "unknown_stream"


@dataclass(frozen=True)
class SensorEvent:
    """An accepted message: the stream IRI term (``<...>``), the sensor segment, its triples."""

    stream: str
    sensor: str
    triples: tuple[Triple, ...]
    arrival_ms: int
    size: int


@dataclass(frozen=True)
class Rejection:
    reason: str          # MALFORMED, OVERSIZED or UNKNOWN_STREAM
    sensor: str
    detail: str


class LogLimiter:
    """Allows one log line per key per ``period_s``; counts what it suppressed."""

    def __init__(self, period_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.period_s = period_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self.suppressed: dict[str, int] = {}

    def allow(self, key: str) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.period_s:
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            return False
        if len(self._last) > 10000:   # sensors come and go; keep the table small
            self._last.clear()
        self._last[key] = now
        return True


class Intake:
    """Decodes and validates sensor messages against the agent's input settings."""

    def __init__(self, settings: AgentSettings, limiter: LogLimiter | None = None) -> None:
        self.settings = settings
        self.max_bytes = settings.input.max_message_bytes
        self.limiter = limiter or LogLimiter()
        self._stream_terms: dict[str, str | None] = {}

    def stream_term(self, segment: str) -> str | None:
        term = self._stream_terms.get(segment, "")
        if term == "":
            iri = self.settings.stream_iri(segment)
            term = f"<{iri}>" if iri else None
            if len(self._stream_terms) < 10000:
                self._stream_terms[segment] = term
        return term

    def decode(self, topic: str, payload: bytes, arrival_ms: int) -> SensorEvent | Rejection:
        """The event a message carries, or why it was rejected (logged, rate-limited)."""
        try:
            segment, sensor = parse_sensor_topic(topic)
        except TopicError as exc:
            return self._reject(MALFORMED, topic, str(exc))
        if len(payload) > self.max_bytes:
            return self._reject(OVERSIZED, sensor, f"{len(payload)} bytes > limit {self.max_bytes}")
        stream = self.stream_term(segment)
        if stream is None:
            return self._reject(UNKNOWN_STREAM, sensor, f"stream segment {segment!r} has no mapping")
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self._reject(MALFORMED, sensor, f"not UTF-8: {exc}")
        errors: list = []
        triples = tuple(ntriples.parse_lines(text.split("\n"), errors=errors))
        if errors:
            first = errors[0]
            return self._reject(MALFORMED, sensor, f"{first} ({len(errors)} bad line(s))")
        if not triples:
            return self._reject(MALFORMED, sensor, "no triples in message")
        return SensorEvent(stream, sensor, triples, arrival_ms, len(payload))

    def _reject(self, reason: str, sensor: str, detail: str) -> Rejection:
        key = sensor
        if self.limiter.allow(key):
            suppressed = self.limiter.suppressed.pop(key, 0)
            log.warning("input rejected reason=%s sensor=%s detail=%r suppressed_since_last=%d",
                        reason, sensor, detail[:200], suppressed)
        return Rejection(reason, sensor, detail)
