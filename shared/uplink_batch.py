"""Uplink batches: many events in one MQTT payload, compressed, their repeated IRIs written once.

A single event is about 2 kB of JSON-LD, a third of it the fixed ``@context`` and
most of the rest IRIs every event of a gateway repeats (its sensors, SOSA's
properties, the site's namespaces). A batch carries the same events in a fraction of
the bytes:

    header (9 bytes): magic 0xFF, format version 1, codec 0, event count (uint16),
                      inflated body size (uint32), big-endian
    body: zlib (with a preset dictionary of common namespaces) of UTF-8 JSON
          [table, events]

``table`` is a list of strings written once per batch (the encoder puts the IRIs there
that the batch repeats: its sensors, properties, observations; see ``build_table``). Each event
is an array: its context flag (0: none; 1: the standard ``@context``; 2 and 3: the context
of an earlier generation of the format, from before instance results and from before
absences and chained rules), then its ``FIELDS`` in order, as many as its generation
has (14, 16 or 18: an event stored by an older agent is written and read back as it was). A
string is written as a JSON string, as the index of a table entry, or as an array of
pieces (strings and indexes) that concatenate to it; a list, binding or entailed entry is
an array of those, and an instance result's rows an array of arrays of bindings. Decoding gives back the very events
that were encoded: ids, order, every field and the ``@context``.

0xFF never starts UTF-8 text, so no JSON payload begins with it: ingest tells a batch
from a single event by its first byte, on the same topic. Decoding is safe against
hostile input: the payload's size, the event count and the declared inflated size
are checked before anything is inflated; inflating stops at the declared size
(``decompressobj().decompress(data, max_length)``), so a zlib bomb costs no more
memory than an honest batch; the body is read with ``load_json`` (nesting, integer
digits, lone surrogates); every reference must name a table entry, and the text the
references expand to is bounded too. Any violation raises ``BatchError``, an
``EventError``: ingest quarantines it like a bad single event.
"""
from __future__ import annotations

import re
import struct
import zlib
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from .bounded_json import PayloadError, load_json
from .events import (BINDINGS, CONTEXT, ENTAILED, FIELDS, GENERATION_CONTEXTS, GENERATION_FIELD_COUNTS, LONG, ROWS,
                     STRING, STRINGS, EventError, EventLimits, decode_event, encode_event)

MAGIC = 0xFF
FORMAT_VERSION = 1
CODEC_ZLIB = 0
HEADER = struct.Struct(">BBBHI")
MAX_DEPTH = 7          # body, events, event, entailed, entry, axioms, pieces (or rows, row, pair, pieces)
COMPRESS_LEVEL = 6
DEFLATE_LOOKAHEAD = 262   # zlib's MIN_LOOKAHEAD: a match ends at most this far before the window's end

# The zlib preset dictionary of format version 1: text nearly every batch holds, so that
# even a batch of one event compresses well. Changing it needs a new format version.
ZDICT = ("[[\"<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>\",\"<http://www.w3.org/ns/sosa/\","
         "\"<http://www.w3.org/2001/XMLSchema#\",\"<http://www.w3.org/2000/01/rdf-schema#\","
         "\"<https://edgewave.dev/ns#\",\"<http://example.org/\"],"
         "[[1,\"urn:edgewave:event:\",\"Significant\",\"significant\",null,\"Match\",\"match\","
         "<http://www.w3.org/ns/sosa/Observation> <http://www.w3.org/ns/sosa/madeBySensor> "
         "<http://www.w3.org/ns/sosa/observedProperty> <http://www.w3.org/ns/sosa/hasFeatureOfInterest> "
         "<http://www.w3.org/ns/sosa/hasSimpleResult> <http://www.w3.org/ns/sosa/resultTime> "
         "\"^^<http://www.w3.org/2001/XMLSchema#decimal> .\",\"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\","
         "<http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://www.w3.org/2000/01/rdf-schema#range> "
         "<http://www.w3.org/2000/01/rdf-schema#subPropertyOf> <http://www.w3.org/2000/01/rdf-schema#domain> "
         "]]").encode("utf-8")

_IRI = re.compile(r"<[^<>\s]+>")
# the context flag: 0 none, else one of these (the first generation's is 2: flags predate generations)
_CONTEXTS = {1: CONTEXT, 2: GENERATION_CONTEXTS[0], 3: GENERATION_CONTEXTS[1]}
assert GENERATION_CONTEXTS[-1] == CONTEXT
_KEYS = frozenset(f.name for f in FIELDS)
# An event made before the last fields existed (an older agent, or an outbox kept across
# an upgrade) is written with its generation's fields and read back without the later
# ones, exactly as it was; ``check_event`` reads them as null.
_FIRST_FIELDS = GENERATION_FIELD_COUNTS[0]
_LATER_KEYS = frozenset(f.name for f in FIELDS[_FIRST_FIELDS:])   # an event stored before them may lack them
_FIELD_INDEX = {f.name: i for i, f in enumerate(FIELDS)}


def _field_count(event: Mapping[str, Any]) -> int:
    """How many fields ``event`` is written with: those of the oldest generation that has all its keys."""
    last = max((_FIELD_INDEX[k] for k in _LATER_KEYS if k in event), default=-1)
    return next(n for n in GENERATION_FIELD_COUNTS if n > last)


class BatchError(EventError):
    """A payload that is not a well-formed uplink batch, or events that cannot be written as one."""


def is_batch(payload: bytes) -> bool:
    """Whether ``payload`` is a batch (its first byte is the magic one) rather than a single JSON event."""
    return payload[:1] == bytes((MAGIC,))


# -- encoding ------------------------------------------------------------------------------

def _texts(event: Mapping[str, Any]) -> Iterable[str]:
    """Every string of ``event`` the table may shorten (all but the id, which is unique)."""
    for f in FIELDS:
        value = event.get(f.name)
        if value is None or f.name == "id":
            continue
        if f.type == STRING:
            yield value
        elif f.type == STRINGS:
            yield from value
        elif f.type == BINDINGS:
            for b in value:
                yield b["variable"]
                yield b["value"]
        elif f.type == ENTAILED:
            for e in value:
                yield e["triple"]
                yield e["from"]
                yield from e["axioms"]
        elif f.type == ROWS:
            for row in value:
                for b in row:
                    yield b["value"]


def build_table(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The IRIs a batch repeats (its sensors, properties, observation and site IRIs), in order
    of first occurrence, or none for a batch of one event.

    zlib already shortens what repeats within 32 kB, so the table pays only a little
    (about 5 % of a batch of 32 on the demo's events, docs/benchmarks.md): whole IRIs that
    occur more than once do; repeated values that are not IRIs (pattern names, variables)
    and the namespaces of IRIs that occur once measured worse than none, and so did any
    table for a single event. The decoder reads any entry (a whole string, or pieces of
    one), so this choice can change without a new format version.
    """
    if len(events) < 2:
        return []
    iris: Counter[str] = Counter()
    for event in events:
        for text in _texts(event):
            if "<" in text:
                iris.update(_IRI.findall(text))
    return [iri for iri, n in iris.items() if n > 1]


class _Writer:
    """Writes strings against one batch's table."""

    def __init__(self, table: list[str]) -> None:
        self.index = {text: i for i, text in enumerate(table)}

    def text(self, value: str) -> Any:
        index = self.index
        if value in index:
            return index[value]
        if not index or "<" not in value:
            return value
        pieces: list[Any] = []
        last = 0
        for m in _IRI.finditer(value):
            ref = index.get(m.group())
            if ref is None:
                continue
            if m.start() > last:
                pieces.append(value[last:m.start()])
            pieces.append(ref)
            last = m.end()
        if not pieces:
            return value
        if last < len(value):
            pieces.append(value[last:])
        return pieces

    def event(self, event: Mapping[str, Any]) -> list[Any]:
        unknown = set(event) - _KEYS - {"@context"}
        missing = _KEYS - set(event) - _LATER_KEYS
        if unknown or missing:
            raise BatchError(f"not an uplink event: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
        flag = 0
        if "@context" in event:
            flag = next((n for n, context in _CONTEXTS.items() if event["@context"] == context), None)
            if flag is None:
                raise BatchError("an event with an @context other than the standard one cannot be batched")
        out: list[Any] = [flag]
        text = self.text
        for f in FIELDS[:_field_count(event)]:
            value = event.get(f.name)
            if value is None:
                out.append(None)
            elif f.type == STRING:
                out.append(text(_str(value, f.name)))
            elif f.type == LONG:
                if type(value) is not int:
                    raise BatchError(f"{f.name} must be an integer")
                out.append(value)
            elif f.type == STRINGS:
                out.append([text(_str(v, f.name)) for v in value])
            elif f.type == BINDINGS:
                out.append([[text(_str(b["variable"], f.name)), text(_str(b["value"], f.name))] for b in value])
            elif f.type == ROWS:
                out.append([[[text(_str(b["variable"], f.name)), text(_str(b["value"], f.name))] for b in row]
                            for row in value])
            else:
                out.append([[text(_str(e["triple"], f.name)), text(_str(e["from"], f.name)),
                             [text(_str(a, f.name)) for a in e["axioms"]]] for e in value])
        return out


def _str(value: Any, name: str) -> str:
    if type(value) is not str:
        raise BatchError(f"{name}: a string was expected, got {type(value).__name__}")
    return value


def encode_batch(events: Sequence[Mapping[str, Any]], *, shared_table: bool = True,
                 level: int = COMPRESS_LEVEL) -> bytes:
    """One MQTT payload holding ``events`` (the dicts the agent stores, in order).

    ``shared_table=False`` writes every string out (the table is empty): only zlib shortens
    it. Raises BatchError for no events, more than 65,535, or a dict that is not an event.
    """
    if not 1 <= len(events) <= 0xFFFF:
        raise BatchError(f"a batch holds 1 to 65535 events, not {len(events)}")
    try:
        table = build_table(events) if shared_table else []
        writer = _Writer(table)
        body = encode_event([table, [writer.event(e) for e in events]])   # compact JSON, UTF-8
    except (KeyError, TypeError) as exc:
        raise BatchError(f"not an uplink event: {type(exc).__name__} {exc}") from exc
    except UnicodeEncodeError as exc:
        raise BatchError(f"a string is not text (lone surrogate): {exc.reason}") from exc
    if len(body) > 0xFFFFFFFF:
        raise BatchError("batch too large")
    packer = zlib.compressobj(level, zlib.DEFLATED, window_bits(len(body)), zdict=ZDICT)
    return HEADER.pack(MAGIC, FORMAT_VERSION, CODEC_ZLIB, len(events), len(body)) + packer.compress(body) \
        + packer.flush()


def window_bits(body_size: int) -> int:
    """The smallest zlib window that holds the preset dictionary and the whole body.

    Within it deflate finds every match the largest window would (a match reaches back at
    most the window less ``DEFLATE_LOOKAHEAD``), so the compressed data is as small, and
    setting up the compressor costs far less: zlib allocates and clears buffers in
    proportion to the window, and for a batch of one event the 32 kB window took longer to
    set up than the compressing did. The inflater reads any window up to 32 kB."""
    return min(zlib.MAX_WBITS, max(9, (len(ZDICT) + body_size + DEFLATE_LOOKAHEAD).bit_length()))


# -- decoding ------------------------------------------------------------------------------

class _Reader:
    """Resolves one batch's references, counting the characters they expand to."""

    def __init__(self, table: list[str], budget: int) -> None:
        self.table = table
        self.budget = budget

    def text(self, value: Any, where: str) -> str:
        if type(value) is str:
            out = value
        elif type(value) is int:
            out = self._entry(value, where)
        elif type(value) is list and value:
            parts = []
            for piece in value:
                if type(piece) is str:
                    parts.append(piece)
                elif type(piece) is int:
                    parts.append(self._entry(piece, where))
                else:
                    raise BatchError(f"{where}: a piece must be a string or a table index")
            out = "".join(parts)
        else:
            raise BatchError(f"{where}: a string, a table index or a non-empty array of pieces was expected")
        self.budget -= len(out)
        if self.budget < 0:
            raise BatchError("the batch's strings expand beyond max_inflated_bytes")
        return out

    def _entry(self, index: int, where: str) -> str:
        if not 0 <= index < len(self.table):
            raise BatchError(f"{where}: reference {index} outside the table of {len(self.table)} entries")
        return self.table[index]

    def texts(self, value: Any, where: str) -> list[str]:
        if type(value) is not list:
            raise BatchError(f"{where} must be an array")
        return [self.text(v, where) for v in value]

    def event(self, raw: Any, number: int) -> dict[str, Any]:
        if (type(raw) is not list or len(raw) - 1 not in GENERATION_FIELD_COUNTS or raw[0] not in (0, *_CONTEXTS)
                or type(raw[0]) is not int):
            raise BatchError(f"event {number}: not an array of a context flag and {len(FIELDS)} fields")
        event: dict[str, Any] = {"@context": _CONTEXTS[raw[0]]} if raw[0] else {}
        for f, value in zip(FIELDS, raw[1:]):
            where = f"event {number} {f.name}"
            if value is None:
                event[f.name] = None
            elif f.type == STRING:
                event[f.name] = self.text(value, where)
            elif f.type == LONG:
                if type(value) is not int:
                    raise BatchError(f"{where} must be an integer")
                event[f.name] = value
            elif f.type == STRINGS:
                event[f.name] = self.texts(value, where)
            elif f.type == BINDINGS:
                if type(value) is not list or any(type(b) is not list or len(b) != 2 for b in value):
                    raise BatchError(f"{where} must be an array of [variable, value] pairs")
                event[f.name] = [{"variable": self.text(b[0], where), "value": self.text(b[1], where)}
                                 for b in value]
            elif f.type == ROWS:
                if type(value) is not list or any(type(row) is not list or any(type(b) is not list or len(b) != 2
                                                                                for b in row) for row in value):
                    raise BatchError(f"{where} must be an array of rows of [variable, value] pairs")
                event[f.name] = [[{"variable": self.text(b[0], where), "value": self.text(b[1], where)}
                                  for b in row] for row in value]
            else:
                if type(value) is not list or any(type(e) is not list or len(e) != 3 for e in value):
                    raise BatchError(f"{where} must be an array of [triple, from, axioms] entries")
                event[f.name] = [{"triple": self.text(e[0], where), "from": self.text(e[1], where),
                                  "axioms": self.texts(e[2], where)} for e in value]
        return event


def read_header(payload: bytes, limits: EventLimits = EventLimits()) -> tuple[int, int]:
    """(event count, inflated size) of a batch, checked against ``limits`` before anything is inflated."""
    if len(payload) > limits.max_batch_bytes:
        raise BatchError(f"batch of {len(payload)} bytes (at most {limits.max_batch_bytes})")
    if len(payload) < HEADER.size:
        raise BatchError(f"batch of {len(payload)} bytes is shorter than its {HEADER.size}-byte header")
    magic, version, codec, count, inflated = HEADER.unpack_from(payload)
    if magic != MAGIC:
        raise BatchError("not a batch: wrong first byte")
    if version != FORMAT_VERSION:
        raise BatchError(f"batch format version {version} is unknown (this ingest reads {FORMAT_VERSION})")
    if codec != CODEC_ZLIB:
        raise BatchError(f"batch codec {codec} is unknown")
    if not 1 <= count <= limits.max_batch_events:
        raise BatchError(f"batch of {count} events (1 to {limits.max_batch_events})")
    if inflated > limits.max_inflated_bytes:
        raise BatchError(f"batch inflates to {inflated} bytes (at most {limits.max_inflated_bytes})")
    return count, inflated


def inflate(payload: bytes, limits: EventLimits = EventLimits()) -> tuple[int, bytes]:
    """(event count, body) of a batch: inflated no further than its declared size, which must be exact."""
    count, size = read_header(payload, limits)
    unpacker = zlib.decompressobj(zdict=ZDICT)
    try:
        body = unpacker.decompress(memoryview(payload)[HEADER.size:], size + 1)
    except zlib.error as exc:
        raise BatchError(f"batch body is not zlib data: {exc}") from exc
    if len(body) != size:
        raise BatchError(f"batch body inflates to {'more than ' if len(body) > size else ''}"
                         f"{len(body)} bytes, not the {size} its header declares")
    if not unpacker.eof or unpacker.unconsumed_tail or unpacker.unused_data:
        raise BatchError("batch body is cut short or followed by other data")
    return count, body


def decode_batch(payload: bytes, limits: EventLimits = EventLimits()) -> list[dict[str, Any]]:
    """The events of a batch, exactly as they were encoded; raises BatchError for anything else.

    The events are checked for shape (every field of the type ``FIELDS`` gives it), not for
    meaning: check each one with ``check_event`` before landing it, as a single event is.
    """
    count, body = inflate(payload, limits)
    try:
        doc = load_json(body, max_bytes=limits.max_inflated_bytes, max_depth=MAX_DEPTH)
    except PayloadError as exc:
        raise BatchError(f"batch body: {exc}") from exc
    if type(doc) is not list or len(doc) != 2 or type(doc[0]) is not list or type(doc[1]) is not list:
        raise BatchError("batch body must be [table, events]")
    table, raw_events = doc
    if any(type(entry) is not str for entry in table):
        raise BatchError("the batch's table must hold strings only")
    if len(raw_events) != count:
        raise BatchError(f"batch holds {len(raw_events)} events, its header says {count}")
    reader = _Reader(table, limits.max_inflated_bytes)
    return [reader.event(raw, i) for i, raw in enumerate(raw_events)]


def check_event(event: Mapping[str, Any], limits: EventLimits = EventLimits()) -> dict[str, Any]:
    """A batch's event checked exactly as a single event is (``decode_event`` on its JSON form),
    so both forms accept and refuse the same events; returns the landed form (no ``@context``)."""
    try:
        payload = encode_event(event)
    except UnicodeEncodeError as exc:
        raise EventError(f"a string is not text: {exc.reason}") from exc
    return decode_event(payload, limits)
