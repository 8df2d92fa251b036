"""Sensor input: from an MQTT message to the triples of one event, or a counted rejection.

A message on ``ew/in/<stream>/<sensor>`` is one event (docs/ARCHITECTURE.md): one or more
N-Triples lines. A message on any other topic is a device's own payload (JSON, SenML,
plain text), turned into triples by the config document's mapping whose topic filter it
matches (agent/mapping/, docs/mappings.md). Either is accepted whole or not at all —
feeding half an event to the engine could complete a pattern the sensor never reported. Rejections are counted by
reason and logged at most once per sensor per minute (the line says how many were
suppressed since), so a sensor stuck in a loop of bad output cannot flood the log or
stop the agent.

Every limit is checked before the work it bounds: the size before decoding, the nesting
of quoted triples before parsing (the parser recurses once per level), the number of
statements while parsing (it stops one past the limit). Whatever else decoding raises
is a rejection too (``decoder_error``): the engine sees a whole event or nothing.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import TYPE_CHECKING, Sequence

from edgewave.agent.config import AgentSettings
from edgewave.shared import ntriples
from edgewave.shared.log_limit import LogLimiter
from edgewave.shared.topics import SENSOR_PREFIX, TopicError, parse_sensor_topic, topic_matches

if TYPE_CHECKING:
    from edgewave.agent.mapping import CompiledMapping

log = logging.getLogger("edgewave.agent.intake")

Triple = tuple[str, str, str]

# Rejection reasons; each is a counter in the agent's status.
MALFORMED = "malformed"                 # not UTF-8, not N-Triples(-star), no statement, bad topic
OVERSIZED = "oversized"                 # more than input.max_message_bytes
UNKNOWN_STREAM = "unknown_stream"       # the topic's stream segment maps to no stream IRI
QUOTED_TOO_DEEP = "quoted_too_deep"     # << >> nested beyond input.max_quoted_depth
TOO_MANY_TRIPLES = "too_many_triples"   # more than input.max_triples_per_message statements
DECODER_ERROR = "decoder_error"         # decoding raised something no rule above expected
UNMAPPED_TOPIC = "unmapped_topic"       # not ew/in/..., and no mapping's topic filter matches it
REASONS = (MALFORMED, OVERSIZED, UNKNOWN_STREAM, QUOTED_TOO_DEEP, TOO_MANY_TRIPLES, DECODER_ERROR, UNMAPPED_TOPIC)
# A payload its mapping refused is counted as ``payload_rejected`` and, per mapping and the
# mapping's reason (agent/mapping/ REASONS), as ``payload_rejected.<mapping>.<reason>``.
PAYLOAD_REJECTED = "payload_rejected"
_NTRIPLES_TOPICS = SENSOR_PREFIX + "/"
_MAX_ROUTES = 10000                     # topics whose mapping is remembered

# In N-Triples, '<<' and '>>' outside literals and IRIs are quoted-triple brackets, and a
# '#' there starts a comment. Unrolled loops: linear even on a line that never closes.
_LITERAL_OR_IRI = re.compile(r'"[^"\\\n\r]*(?:\\.[^"\\\n\r]*)*"'
                             r'|<[^<>"{}|^`\\\x00-\x20]*(?:\\.[^<>"{}|^`\\\x00-\x20]*)*>')
_QUOTE_BRACKET = re.compile(r"<<|>>")
_QUOTE_STEP = {"<<": 1, ">>": -1}


def quoted_depth(line: str) -> int:
    """How deeply quoted triples nest in one N-Triples-star line, found without parsing it."""
    plain = _LITERAL_OR_IRI.sub(" ", line).split("#", 1)[0]
    return max(accumulate(map(_QUOTE_STEP.__getitem__, _QUOTE_BRACKET.findall(plain))), default=0)


def deepest_quoted(lines: Sequence[str], limit: int) -> tuple[int, int]:
    """(depth, 1-based line number) of the most deeply nested line that nests beyond ``limit``
    levels, or (0, 0). A line holding at most ``limit`` '<<' cannot, so only those with
    more are scanned: for ordinary messages this is one ``str.count`` per line."""
    deepest, where = 0, 0
    for number, line in enumerate(lines, 1):
        if line.count("<<") > limit:
            depth = quoted_depth(line)
            if depth > deepest:
                deepest, where = depth, number
    return (deepest, where) if deepest > limit else (0, 0)


@dataclass(frozen=True)
class SensorEvent:
    """An accepted message: the stream IRI term (``<...>``), the sensor segment (a device
    payload's topic), its triples."""

    stream: str
    sensor: str
    triples: tuple[Triple, ...]
    arrival_ms: int
    size: int


@dataclass(frozen=True)
class Rejection:
    reason: str          # one of REASONS, or a mapping's reason when ``mapping`` is set
    sensor: str
    detail: str
    mapping: str | None = None     # the mapping that refused the payload

    @property
    def counter(self) -> str:
        """The status counter of this rejection (besides ``payload_rejected`` for a mapping's)."""
        return self.reason if self.mapping is None else f"{PAYLOAD_REJECTED}.{self.mapping}.{self.reason}"


class Intake:
    """Decodes and validates sensor messages against the agent's input settings."""

    def __init__(self, settings: AgentSettings, limiter: LogLimiter | None = None) -> None:
        self.settings = settings
        self.max_bytes = settings.input.max_message_bytes
        self.max_depth = settings.input.max_quoted_depth
        self.max_triples = settings.input.max_triples_per_message
        self.limiter = limiter or LogLimiter()
        self._stream_terms: dict[str, str | None] = {}
        self.mappings: tuple[CompiledMapping, ...] = ()
        self._routes: dict[str, CompiledMapping | None] = {}

    def set_mappings(self, mappings: Sequence[CompiledMapping]) -> None:
        """The payload mappings of the applied config document (their filters do not overlap)."""
        self.mappings = tuple(mappings)
        self._routes = {}

    def route(self, topic: str) -> CompiledMapping | None:
        """The mapping whose topic filter matches ``topic``, if any."""
        try:
            return self._routes[topic]
        except KeyError:
            found = next((m for m in self.mappings if topic_matches(m.topic_filter, topic)), None)
            if len(self._routes) < _MAX_ROUTES:
                self._routes[topic] = found
            return found

    def stream_term(self, segment: str) -> str | None:
        term = self._stream_terms.get(segment, "")
        if term == "":
            iri = self.settings.stream_iri(segment)
            term = f"<{iri}>" if iri else None
            if len(self._stream_terms) < 10000:
                self._stream_terms[segment] = term
        return term

    def decode(self, topic: str, payload: bytes, arrival_ms: int) -> SensorEvent | Rejection:
        """The event a message carries, or why it was rejected (logged, rate-limited).

        Never raises: an exception from decoding (a parser bug, RecursionError,
        MemoryError) is the rejection ``decoder_error``."""
        try:
            return self._decode(topic, payload, arrival_ms)
        except Exception as exc:
            return self._reject(DECODER_ERROR, topic.rsplit("/", 1)[-1], f"{type(exc).__name__}: {exc}")

    def _decode(self, topic: str, payload: bytes, arrival_ms: int) -> SensorEvent | Rejection:
        if not topic.startswith(_NTRIPLES_TOPICS):
            return self._map(topic, payload, arrival_ms)
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
        lines = text.split("\n")
        if text.count("<<") > self.max_depth:
            depth, line_no = deepest_quoted(lines, self.max_depth)
            if depth:
                return self._reject(QUOTED_TOO_DEEP, sensor, f"line {line_no}: quoted triples nested {depth} "
                                    f"deep > limit {self.max_depth}")
        errors: list = []
        # One past the limit is enough to know: the parser stops there.
        triples = tuple(islice(ntriples.parse_lines(lines, errors=errors), self.max_triples + 1))
        if errors:
            first = errors[0]
            return self._reject(MALFORMED, sensor, f"{first} ({len(errors)} bad line(s))")
        if len(triples) > self.max_triples:
            return self._reject(TOO_MANY_TRIPLES, sensor, f"more than {self.max_triples} statements")
        if not triples:
            return self._reject(MALFORMED, sensor, "no triples in message")
        return SensorEvent(stream, sensor, triples, arrival_ms, len(payload))

    def _map(self, topic: str, payload: bytes, arrival_ms: int) -> SensorEvent | Rejection:
        """A device's payload through the mapping its topic routes to."""
        from edgewave.agent.mapping import PayloadRejected   # loaded with the first mapping

        mapping = self.route(topic)
        if mapping is None:
            return self._reject(UNMAPPED_TOPIC, topic, "no mapping's topic filter matches this topic")
        if len(payload) > self.max_bytes:
            return self._reject(OVERSIZED, topic, f"{len(payload)} bytes > limit {self.max_bytes}", mapping.name)
        try:
            triples = mapping.map(payload, topic, arrival_ms)
        except PayloadRejected as exc:
            return self._reject(exc.reason, topic, str(exc), mapping.name)
        if len(triples) > self.max_triples:
            return self._reject(TOO_MANY_TRIPLES, topic, f"{len(triples)} statements > limit {self.max_triples}",
                                mapping.name)
        return SensorEvent(mapping.stream, topic, triples, arrival_ms, len(payload))

    def _reject(self, reason: str, sensor: str, detail: str, mapping: str | None = None) -> Rejection:
        key = sensor
        if self.limiter.allow(key):
            suppressed = self.limiter.suppressed.pop(key, 0)
            said = "" if mapping is None else f" mapping={mapping}"
            log.warning("input rejected reason=%s%s sensor=%s detail=%r suppressed_since_last=%d",
                        reason, said, sensor[:100], detail[:200], suppressed)
        return Rejection(reason, sensor, detail, mapping)
