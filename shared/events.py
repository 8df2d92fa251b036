"""Uplink events (agent to cloud): JSON-LD with a fixed inline @context.

An MQTT message holds one event, or a batch of them (shared/uplink_batch.py). The same
bytes are plain JSON to Spark (flat fields, an array of {variable, value} bindings, an
ordered list of N-Triples statements) and real RDF to a JSON-LD processor, because
every key is mapped by the context. The id is derived from what the event says, so the
same match always gets the same id and the cloud can drop duplicates after
retransmission.

What an event carries beyond its id, window and bindings (or sensor, property and
result) is the gateway's choice (``MATCH_CONTENT``, ``significant_event(with_triples=)``):
the id is always computed from the contributing triples, sent or not, so it does not
change with the choice.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from itertools import islice
from typing import Any, Iterable, Mapping, Sequence

from .bounded_json import DEFAULT_MAX_BYTES, PayloadError, load_json
from .vocab import EW_NS, XSD_NS

KIND_MATCH = "match"
KIND_SIGNIFICANT = "significant"
KIND_INSTANCE = "instance"     # the result of one window instance of a per-instance query
EVENT_ID_PREFIX = "urn:edgewave:event:"

CONTEXT: dict[str, Any] = {
    "ew": EW_NS,
    "xsd": XSD_NS,
    "id": "@id",
    "type": "@type",
    "Match": "ew:Match",
    "Significant": "ew:Significant",
    "Instance": "ew:InstanceResult",
    "gateway": "ew:gateway",
    "pattern": "ew:pattern",
    "kind": "ew:kind",
    "windowStart": {"@id": "ew:windowStart", "@type": "xsd:long"},
    "windowEnd": {"@id": "ew:windowEnd", "@type": "xsd:long"},
    "emittedAt": {"@id": "ew:emittedAt", "@type": "xsd:long"},
    "bindings": {"@id": "ew:binding", "@container": "@set"},
    "variable": "ew:variable",
    "value": "ew:value",
    "triples": {"@id": "ew:triple", "@container": "@list"},
    "sensor": "ew:sensor",
    "property": "ew:property",
    "result": "ew:result",
    # Evidence of a match: each contributing triple the gateway entailed (a node per entry),
    # the asserted triple it came from and the schema statements that entail it, in order.
    "entailed": {"@id": "ew:entailed", "@container": "@set"},
    "triple": "ew:statement",
    "from": "ew:entailedFrom",
    "axioms": {"@id": "ew:axiom", "@container": "@list"},
    # An instance result: its streaming operator (RSTREAM, ISTREAM, DSTREAM) and its rows, each
    # a row's bindings (an unbound variable has none), in the order the query gives them.
    "operator": "ew:streamOperator",
    "rows": {"@id": "ew:row", "@container": "@list"},
    # A match of an absence pattern: the absent group's triple patterns, the match's bindings
    # filled in (its deadline is windowEnd). A match that used triples a chained rule
    # constructed: the ids of the rule matches that made them.
    "expected": {"@id": "ew:expected", "@container": "@list"},
    "derivedFrom": {"@id": "ew:derivedFrom", "@type": "@id", "@container": "@set"},
}

GENERATIONS: tuple[tuple[str, ...], ...] = (
    (),                                  # matches and significant observations
    ("Instance", "operator", "rows"),    # window-instance results
    ("expected", "derivedFrom"),         # absences and chained rules
)
"""The context terms each generation of the format added. An event made by an older agent, or
kept in an outbox across an upgrade, has the fields and the @context of its generation and
reads as if the later fields were null (shared/uplink_batch.py writes it as it is)."""
GENERATION_CONTEXTS: tuple[dict[str, Any], ...] = tuple(
    {k: v for k, v in CONTEXT.items() if not any(k in later for later in GENERATIONS[n + 1:])}
    for n in range(len(GENERATIONS)))
EARLIER_CONTEXT = GENERATION_CONTEXTS[0]
"""The context of events stored before instance results existed."""

# The one definition of an event's fields: ingest validates against it and the Spark
# job's schema is derived from it (cloud/job.py), so what ingest lands, Spark can read.
STRING = "string"            # a JSON string
LONG = "long"                # a JSON integer within a signed 64-bit range (not a boolean)
STRINGS = "strings"          # an array of strings
BINDINGS = "bindings"        # an array of {"variable": string, "value": string}
ENTAILED = "entailed"        # an array of {"triple": string, "from": string, "axioms": [string, ...]}
ROWS = "rows"                # an array of rows, each an array of {"variable": string, "value": string}


@dataclass(frozen=True)
class EventField:
    name: str
    type: str
    required: bool           # must be present and not null


FIELDS: tuple[EventField, ...] = (
    EventField("id", STRING, True),
    EventField("type", STRING, True),
    EventField("gateway", STRING, True),
    EventField("pattern", STRING, False),
    EventField("kind", STRING, True),
    EventField("windowStart", LONG, True),
    EventField("windowEnd", LONG, True),
    EventField("emittedAt", LONG, True),
    EventField("bindings", BINDINGS, False),
    EventField("triples", STRINGS, False),
    EventField("sensor", STRING, False),
    EventField("property", STRING, False),
    EventField("result", STRING, False),
    EventField("entailed", ENTAILED, False),
    # Fields added later go last: a batch from an agent that predates them has fewer, and
    # reads as if they were null (shared/uplink_batch.py).
    EventField("operator", STRING, False),
    EventField("rows", ROWS, False),
    EventField("expected", STRINGS, False),
    EventField("derivedFrom", STRINGS, False),
)
GENERATION_FIELD_COUNTS = (14, 16, 18)
"""How many of ``FIELDS`` each generation (``GENERATIONS``) has."""
REQUIRED_FIELDS = tuple(f.name for f in FIELDS if f.required)
LONG_MIN, LONG_MAX = -(2 ** 63), 2 ** 63 - 1
TYPE_OF_KIND = {KIND_MATCH: "Match", KIND_SIGNIFICANT: "Significant", KIND_INSTANCE: "Instance"}
STREAM_OPERATORS = ("RSTREAM", "ISTREAM", "DSTREAM")


@dataclass(frozen=True)
class EventLimits:
    """What one uplink message may hold; checked before or while it is parsed (cloud.yaml ``ingest.limits``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = 8          # an event nests 4 deep (event, entailed, entry, axioms; event, rows, row, binding)
    max_triples: int = 10_000
    max_bindings: int = 1_000
    max_entailed: int = 1_000   # entries of ``entailed`` (at most one per contributing triple)
    max_axioms: int = 32        # axioms of one entry (a schema's chains are a few statements)
    max_rows: int = 10_000      # rows of one instance result; each row holds at most max_bindings
    # A batch of events in one message (shared/uplink_batch.py); each of its events is then
    # held to the limits above, as a single event is.
    max_batch_bytes: int = DEFAULT_MAX_BYTES      # the compressed payload
    max_inflated_bytes: int = 8 * 1024 * 1024     # its body once inflated, and its strings once expanded
    max_batch_events: int = 1_000


class EventError(ValueError):
    """A payload that is not an edgewave uplink event."""


def event_id(gateway: str, kind: str, pattern: str, triples: Iterable[tuple[tuple[str, str, str], int]]) -> str:
    """A stable id: a hash of who reported what, from which timestamped triples."""
    h = hashlib.sha256()
    h.update(f"{gateway}\x1f{kind}\x1f{pattern}".encode())
    for (s, p, o), ts in sorted(triples, key=lambda item: (item[1], item[0])):
        h.update(f"\x1e{ts}\x1f{s}\x1f{p}\x1f{o}".encode())
    return EVENT_ID_PREFIX + h.hexdigest()[:32]


def match_event_id(gateway: str, pattern: str, triples: Iterable[tuple[tuple[str, str, str], int]]) -> str:
    """The id ``match_event`` gives a match: how a later event names it (``derivedFrom``)."""
    return event_id(gateway, KIND_MATCH, pattern, triples)


def _statement(triple: tuple[str, str, str]) -> str:
    return f"{triple[0]} {triple[1]} {triple[2]} ."


EVIDENCE_MAX_BYTES = 64 * 1024
"""The most one match's ``entailed`` field may take (UTF-8 bytes of its statements), well
inside ingest's ``max_bytes``: evidence must never cost the match its event."""


def entailed_entries(entailed: Iterable[Any], limits: EventLimits = EventLimits(),
                     max_bytes: int = EVIDENCE_MAX_BYTES) -> list[dict[str, Any]]:
    """The ``entailed`` field from a match's evidence (``Match.entailed``: items with ``triple``,
    ``source`` and ``axioms``), cut so that ingest never refuses the match for it: at most
    ``max_entailed`` entries, each with the first ``max_axioms`` axioms of its chain, and
    entries only while they fit ``max_bytes``. A real schema's chains are a few statements,
    so the cuts only guard against a pathological schema."""
    out: list[dict[str, Any]] = []
    used = 0
    for e in islice(entailed, limits.max_entailed):
        entry = {"triple": _statement(e.triple), "from": _statement(e.source),
                 "axioms": [_statement(a) for a in e.axioms[:limits.max_axioms]]}
        used += sum(len(text.encode("utf-8", "surrogatepass")) + 8
                    for text in (entry["triple"], entry["from"], *entry["axioms"]))
        if used > max_bytes:
            break
        out.append(entry)
    return out


MATCH_FULL = "full"
MATCH_NONE = "none"
MATCH_CONTENT = (MATCH_FULL, MATCH_NONE)
"""What a match event carries besides its bindings and window: ``full``, the contributing
triples and the evidence of which were entailed (what the dashboard's evidence view
shows); ``none``, neither (``triples`` and ``entailed`` null)."""


def match_event(gateway: str, pattern: str, bindings: Mapping[str, str], start: int, end: int,
                triples: Iterable[tuple[tuple[str, str, str], int]], emitted_at: int,
                entailed: Iterable[Any] = (), content: str = MATCH_FULL, expected: Sequence[str] | None = None,
                derived_from: Sequence[str] | None = None) -> dict[str, Any]:
    """The event for one pattern match; ``triples`` are (triple, timestamp) pairs, ``entailed``
    the match's evidence (``Match.entailed``): which of them were entailed, from what, by
    which axioms. ``expected``: for an absence, what did not arrive by ``end`` (the absent
    group's triple patterns as statements, the bindings filled in); ``derived_from``: the
    ids of the matches of chained rules that made triples this match used (sent with
    ``content`` none too: a link is a few bytes). The id does not depend on these or on
    ``content``: the same match keeps its id."""
    if content not in MATCH_CONTENT:
        raise ValueError(f"match content must be one of {MATCH_CONTENT}, not {content!r}")
    triples = list(triples)
    full = content == MATCH_FULL
    return {
        "@context": CONTEXT,
        "id": match_event_id(gateway, pattern, triples),
        "type": "Match",
        "gateway": gateway,
        "pattern": pattern,
        "kind": KIND_MATCH,
        "windowStart": int(start),
        "windowEnd": int(end),
        "emittedAt": int(emitted_at),
        "bindings": [{"variable": k, "value": v} for k, v in bindings.items()],
        "triples": [_statement(t) for t, _ in triples] if full else None,
        "sensor": None,
        "property": None,
        "result": None,
        "entailed": entailed_entries(entailed) if full else None,
        "operator": None,
        "rows": None,
        "expected": list(expected) if expected else None,
        "derivedFrom": list(derived_from) if derived_from else None,
    }


def significant_event(gateway: str, sensor: str, prop: str, result: str, observed_at: int,
                      triples: Iterable[tuple[str, str, str]], emitted_at: int,
                      with_triples: bool = True) -> dict[str, Any]:
    """The event for an observation that matched no pattern but changed significantly.

    Sensor, property, result and time (``windowStart``) are what the cloud reads of it;
    ``with_triples=False`` leaves the observation's statements out (``triples`` null),
    which repeat them with the observation's IRI, type and feature of interest."""
    triples = list(triples)
    timed = [(t, observed_at) for t in triples]
    return {
        "@context": CONTEXT,
        "id": event_id(gateway, KIND_SIGNIFICANT, f"{sensor} {prop}", timed),
        "type": "Significant",
        "gateway": gateway,
        "pattern": None,
        "kind": KIND_SIGNIFICANT,
        "windowStart": int(observed_at),
        "windowEnd": int(observed_at),
        "emittedAt": int(emitted_at),
        "bindings": [],
        "triples": [_statement(t) for t in triples] if with_triples else None,
        "sensor": sensor,
        "property": prop,
        "result": result,
        "entailed": None,
        "operator": None,
        "rows": None,
        "expected": None,
        "derivedFrom": None,
    }


INSTANCE_ROWS_PER_EVENT = 500
"""An instance result with more rows goes up as several events (``part`` 0, 1, ...), each
well inside ingest's limits (``max_rows``, ``max_bytes``) whatever the query returns."""
INSTANCE_BYTES_PER_EVENT = 256 * 1024


def instance_event_id(gateway: str, query: str, start: int, end: int, operator: str, part: int) -> str:
    """The id of one part of a reported window instance: what it says, not when it was sent."""
    return event_id(gateway, KIND_INSTANCE, f"{query}\x1f{start}\x1f{end}\x1f{operator}\x1f{part}", ())


def instance_events(gateway: str, query: str, start: int, end: int, operator: str,
                    rows: Sequence[Mapping[str, str]], emitted_at: int) -> list[dict[str, Any]]:
    """The events of one reported window instance of a per-instance query: its bounds,
    streaming operator and rows (``{variable: N-Triples term}``, an unbound variable absent).

    The id is derived from gateway, query, bounds, operator and part: an instance reported
    again (replayed after a crash) gets the same ids, which the cloud drops as duplicates.
    Usually one event; a result too large for one is cut into parts of whole rows."""
    if operator not in STREAM_OPERATORS:
        raise ValueError(f"operator must be one of {STREAM_OPERATORS}, not {operator!r}")
    parts: list[list[list[dict[str, str]]]] = [[]]
    used = 0
    for row in rows:
        encoded = [{"variable": k, "value": v} for k, v in row.items()]
        size = sum(len(k) + len(v) + 32 for k, v in row.items())
        if parts[-1] and (len(parts[-1]) >= INSTANCE_ROWS_PER_EVENT or used + size > INSTANCE_BYTES_PER_EVENT):
            parts.append([])
            used = 0
        parts[-1].append(encoded)
        used += size
    return [{
        "@context": CONTEXT,
        "id": instance_event_id(gateway, query, start, end, operator, part),
        "type": "Instance",
        "gateway": gateway,
        "pattern": query,
        "kind": KIND_INSTANCE,
        "windowStart": int(start),
        "windowEnd": int(end),
        "emittedAt": int(emitted_at),
        "bindings": None,
        "triples": None,
        "sensor": None,
        "property": None,
        "result": None,
        "entailed": None,
        "operator": operator,
        "rows": part_rows,
        "expected": None,
        "derivedFrom": None,
    } for part, part_rows in enumerate(parts)]


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON, the MQTT payload."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_event(payload: bytes | str, limits: EventLimits = EventLimits()) -> dict[str, Any]:
    """Parse and check an event payload; raises EventError naming what is wrong.

    The checks are exactly what the Spark job's schema needs (``FIELDS``): a
    value Spark would read as null (a boolean where a long belongs, a number
    beyond 64 bits) is refused here with the field named, rather than dropped
    there without a trace. Fields the schema does not know are not kept.
    """
    try:
        raw = load_json(payload, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
    except PayloadError as exc:
        raise EventError(str(exc)) from exc
    if not isinstance(raw, dict):
        raise EventError("event must be a JSON object")
    missing = [f.name for f in FIELDS if f.required and raw.get(f.name) is None]
    if missing:
        raise EventError(f"missing fields: {', '.join(missing)}")
    event: dict[str, Any] = {}
    for f in FIELDS:
        value = raw.get(f.name)
        if value is not None:
            _check_field(f, value, limits)
        event[f.name] = value
    if not event["id"].startswith(EVENT_ID_PREFIX):
        raise EventError(f"bad event id {event['id'][:80]!r}")
    if event["kind"] not in TYPE_OF_KIND:
        raise EventError(f"unknown kind {event['kind'][:80]!r}")
    if event["type"] != TYPE_OF_KIND[event["kind"]]:
        raise EventError(f"type {event['type'][:80]!r} does not go with kind {event['kind']!r}")
    if event["kind"] == KIND_INSTANCE:
        if event["pattern"] is None or event["rows"] is None or event["operator"] not in STREAM_OPERATORS:
            raise EventError("an instance event needs pattern, rows and operator (RSTREAM, ISTREAM or DSTREAM)")
    return event


def _check_bindings(items: list, shape: str) -> None:
    """Every item a {variable, value} object with string members (a match's bindings, an instance's row)."""
    for item in items:
        if type(item) is not dict or type(item.get("variable")) is not str or type(item.get("value")) is not str:
            raise EventError(shape)


def _check_field(f: EventField, value: Any, limits: EventLimits) -> None:
    if f.type == LONG:
        if type(value) is not int:    # bool is an int to Python, not to Spark
            raise EventError(f"{f.name} must be an integer (ms), got {type(value).__name__} {str(value)[:40]}")
        if not LONG_MIN <= value <= LONG_MAX:
            raise EventError(f"{f.name} is beyond a signed 64-bit integer: {value}")
    elif f.type == STRING:
        if type(value) is not str:
            raise EventError(f"{f.name} must be a string, got {type(value).__name__}")
    elif f.type == STRINGS:
        if type(value) is not list or any(type(item) is not str for item in value):
            raise EventError(f"{f.name} must be an array of strings")
        if len(value) > limits.max_triples:
            raise EventError(f"{f.name}: {len(value)} entries (at most {limits.max_triples})")
    elif f.type == BINDINGS:
        if type(value) is not list:
            raise EventError(f"{f.name} must be an array of {{variable, value}} objects")
        if len(value) > limits.max_bindings:
            raise EventError(f"{f.name}: {len(value)} entries (at most {limits.max_bindings})")
        _check_bindings(value, f"{f.name} must be an array of {{variable, value}} objects with string members")
    elif f.type == ROWS:
        shape = f"{f.name} must be an array of rows, each an array of {{variable, value}} objects with string members"
        if type(value) is not list:
            raise EventError(shape)
        if len(value) > limits.max_rows:
            raise EventError(f"{f.name}: {len(value)} rows (at most {limits.max_rows})")
        for row in value:
            if type(row) is not list:
                raise EventError(shape)
            if len(row) > limits.max_bindings:
                raise EventError(f"{f.name}: a row of {len(row)} bindings (at most {limits.max_bindings})")
            _check_bindings(row, shape)
            if len({item["variable"] for item in row}) != len(row):
                raise EventError(f"{f.name}: a row binds a variable twice")
    elif f.type == ENTAILED:
        shape = f"{f.name} must be an array of {{triple, from, axioms}} objects (strings, axioms an array of strings)"
        if type(value) is not list:
            raise EventError(shape)
        if len(value) > limits.max_entailed:
            raise EventError(f"{f.name}: {len(value)} entries (at most {limits.max_entailed})")
        for item in value:
            if (type(item) is not dict or type(item.get("triple")) is not str
                    or type(item.get("from")) is not str or type(item.get("axioms")) is not list
                    or any(type(axiom) is not str for axiom in item["axioms"])):
                raise EventError(shape)
            if len(item["axioms"]) > limits.max_axioms:
                raise EventError(f"{f.name}: an entry with {len(item['axioms'])} axioms (at most {limits.max_axioms})")
    else:
        raise EventError(f"{f.name}: unknown field type {f.type!r}")


def bindings_dict(event: Mapping[str, Any]) -> dict[str, str]:
    """The event's bindings as {variable: term}."""
    return {b["variable"]: b["value"] for b in event.get("bindings") or ()}


def rows_dicts(event: Mapping[str, Any]) -> list[dict[str, str]]:
    """An instance event's rows as [{variable: term}, ...]."""
    return [{b["variable"]: b["value"] for b in row} for row in event.get("rows") or ()]
