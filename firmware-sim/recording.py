"""Recorded streams with their MQTT messages: the recorded-stream line format plus a header comment.

A recorded stream is ``<milliseconds>\\t<N-Triples statement>`` per line (docs/ARCHITECTURE.md,
``edgewave.shared.recorded``, whose ``parse_recorded_line`` reads each line here too). To
replay it to MQTT exactly as it was published, each message is preceded by one comment
line naming its topic, gateway and line count::

    # ew:message topic=ew/in/building/gw1-room3-smoke gateway=gw1 lines=6
    1767600120000\\t<http://example.org/gw1/obs/room3-smoke/1767600120000> <...#type> <...> .
    ...

A message in a device payload format (payload_formats.py: JSON, ESPHome's text) is one
comment line holding its time and its payload, which is a single line of UTF-8::

    # ew:payload topic=zigbee2mqtt/room3-temperature gateway=gw1 ms=1767600128000 {"temperature":63.5,...}

Readers of the plain format (``read_recorded``, ``edgewave match``) skip comment lines,
so a recording is an ordinary recorded stream (of the N-Triples messages it holds). A
file without headers (recorded elsewhere, or converted by hand) replays too: consecutive
lines with the same timestamp form one message on a default topic.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import IO, Iterable, Iterator

from edgewave.shared.recorded import RecordedStreamError, parse_recorded_line

from .fleet import Message

log = logging.getLogger("edgewave.firmware_sim.recording")

HEADER_PREFIX = "# ew:message "
_HEADER = re.compile(r"^# ew:message topic=(\S+) gateway=(\S*) lines=(\d+)\s*$")
PAYLOAD_PREFIX = "# ew:payload "
_PAYLOAD = re.compile(r"^# ew:payload topic=(\S+) gateway=(\S*) ms=(\d{1,18}) (.+)$")
DEFAULT_TOPIC = "ew/in/replay/recorded"


class RecordingError(ValueError):
    """A recording that cannot be replayed as written."""


MAX_HEADER_LINES = 1_000_000     # a header announcing more lines than this is malformed


def header(message: Message) -> str:
    return f"{HEADER_PREFIX}topic={message.topic} gateway={message.gateway} lines={len(message.lines)}"


def message_text(message: Message) -> str:
    """A message as it stands in a recording: header and lines, or the one payload line."""
    if message.body is not None:
        text = message.body.decode("utf-8")
        if not text or "\n" in text or "\r" in text:
            raise ValueError(f"payload on {message.topic} is not one non-empty line: it cannot be recorded")
        return f"{PAYLOAD_PREFIX}topic={message.topic} gateway={message.gateway} ms={message.ms} {text}\n"
    prefix = f"{message.ms}\t"
    return header(message) + "\n" + "".join(prefix + line + "\n" for line in message.lines)


def write_messages(fh: IO[str], messages: Iterable[Message]) -> tuple[int, int]:
    """Write messages as a recorded stream with headers; returns (messages, lines)."""
    n_messages = n_lines = 0
    last = -1
    for message in messages:
        if message.ms < last:
            raise ValueError(f"message at {message.ms} ms after one at {last} ms: recordings are time-ordered")
        last = message.ms
        fh.write(message_text(message))
        n_messages += 1
        n_lines += len(message.lines)
    return n_messages, n_lines


def read_messages(path: str | Path, *, default_topic: str = DEFAULT_TOPIC,
                  errors: list[str] | None = None) -> Iterator[Message]:
    """The messages of a recording, statements kept byte-for-byte as recorded.

    Malformed statement lines are skipped and described in ``errors`` (logged when no
    list is given); the rest of the message still goes out. So is a line that is not
    UTF-8: it is read with its bad bytes kept as lone surrogates, which ``parse_messages``
    refuses.
    """
    # a leading byte-order mark is dropped
    with open(path, encoding="utf-8-sig", errors="surrogateescape") as fh:
        yield from parse_messages(fh, default_topic=default_topic, errors=errors, source=str(path))


def parse_messages(lines: Iterable[str], *, default_topic: str = DEFAULT_TOPIC,
                   errors: list[str] | None = None, source: str = "<stream>") -> Iterator[Message]:
    pending: tuple[str, str, int] | None = None  # topic, gateway, lines still expected
    current: list[str] = []
    current_ms: int | None = None
    current_topic, current_gw = default_topic, ""
    last_ms = -1

    def problem(text: str) -> None:
        if errors is not None:
            errors.append(text)
        else:
            log.warning("recording_line_skipped source=%s reason=%r", source, text)

    def flush() -> Iterator[Message]:
        if current and current_ms is not None:
            yield Message(current_ms, current_gw, current_topic, tuple(current))

    for line_no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if line.startswith(PAYLOAD_PREFIX):
            m = _PAYLOAD.match(line)
            body = _utf8(m.group(4)) if m else None
            if body is None:
                problem(f"{source}:{line_no}: malformed payload line {line[:80]!r}")
                continue
            ms = int(m.group(3))
            if ms < last_ms:
                problem(f"{source}:{line_no}: timestamp {ms} is before {last_ms}; timestamps must not decrease")
                continue
            last_ms = ms
            yield from flush()
            current, current_ms, pending = [], None, None
            yield Message(ms, m.group(2), m.group(1), (), body)
            continue
        if line.startswith(HEADER_PREFIX):
            m = _HEADER.match(line)
            if not m or len(m.group(3)) > len(str(MAX_HEADER_LINES)) or int(m.group(3)) > MAX_HEADER_LINES:
                problem(f"{source}:{line_no}: malformed message header {line!r}")
                continue
            yield from flush()
            current, current_ms = [], None
            current_topic, current_gw = m.group(1), m.group(2)
            pending = (m.group(1), m.group(2), int(m.group(3)))
            continue
        try:
            item = parse_recorded_line(line, line_no)
        except RecordedStreamError as exc:
            problem(f"{source}:{line_no}: {exc.reason}")
            continue
        if item is None:
            continue
        ms, statement, _ = item
        if ms < last_ms:
            problem(f"{source}:{line_no}: timestamp {ms} is before {last_ms}; timestamps must not decrease")
            continue
        last_ms = ms
        if pending is None:
            # No header: a message is the run of lines sharing one timestamp.
            if current and ms != current_ms:
                yield from flush()
                current = []
            current_topic, current_gw = default_topic, ""
        elif current and ms != current_ms:
            problem(f"{source}:{line_no}: message lines with different timestamps ({current_ms}, {ms}); split")
            yield from flush()
            current = []
        current_ms = ms
        current.append(statement)
        if pending is not None:
            topic, gw, remaining = pending
            pending = (topic, gw, remaining - 1) if remaining > 1 else None
            if pending is None:
                yield from flush()
                current, current_ms = [], None
    yield from flush()


def _utf8(text: str) -> bytes | None:
    """``text`` as UTF-8, None when it holds bytes that were not (kept as lone surrogates)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None
