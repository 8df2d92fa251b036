"""Uplink events (agent to cloud): JSON-LD with a fixed inline @context.

One event per MQTT message. The same bytes are plain JSON to Spark (flat fields,
an array of {variable, value} bindings, an ordered list of N-Triples statements)
and real RDF to a JSON-LD processor, because every key is mapped by the context.
The id is derived from what the event says, so the same match always gets the same
id and the cloud can drop duplicates after retransmission.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Mapping

from .vocab import EW_NS, XSD_NS

KIND_MATCH = "match"
KIND_SIGNIFICANT = "significant"
EVENT_ID_PREFIX = "urn:edgewave:event:"

CONTEXT: dict[str, Any] = {
    "ew": EW_NS,
    "xsd": XSD_NS,
    "id": "@id",
    "type": "@type",
    "Match": "ew:Match",
    "Significant": "ew:Significant",
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
}

REQUIRED_FIELDS = ("id", "type", "gateway", "kind", "windowStart", "windowEnd", "emittedAt")


class EventError(ValueError):
    """A payload that is not an edgewave uplink event."""


def event_id(gateway: str, kind: str, pattern: str, triples: Iterable[tuple[tuple[str, str, str], int]]) -> str:
    """A stable id: a hash of who reported what, from which timestamped triples."""
    h = hashlib.sha256()
    h.update(f"{gateway}\x1f{kind}\x1f{pattern}".encode())
    for (s, p, o), ts in sorted(triples, key=lambda item: (item[1], item[0])):
        h.update(f"\x1e{ts}\x1f{s}\x1f{p}\x1f{o}".encode())
    return EVENT_ID_PREFIX + h.hexdigest()[:32]


def _statement(triple: tuple[str, str, str]) -> str:
    return f"{triple[0]} {triple[1]} {triple[2]} ."


def match_event(gateway: str, pattern: str, bindings: Mapping[str, str], start: int, end: int,
                triples: Iterable[tuple[tuple[str, str, str], int]], emitted_at: int) -> dict[str, Any]:
    """The event for one pattern match; ``triples`` are (triple, timestamp) pairs."""
    triples = list(triples)
    return {
        "@context": CONTEXT,
        "id": event_id(gateway, KIND_MATCH, pattern, triples),
        "type": "Match",
        "gateway": gateway,
        "pattern": pattern,
        "kind": KIND_MATCH,
        "windowStart": int(start),
        "windowEnd": int(end),
        "emittedAt": int(emitted_at),
        "bindings": [{"variable": k, "value": v} for k, v in bindings.items()],
        "triples": [_statement(t) for t, _ in triples],
        "sensor": None,
        "property": None,
        "result": None,
    }


def significant_event(gateway: str, sensor: str, prop: str, result: str, observed_at: int,
                      triples: Iterable[tuple[str, str, str]], emitted_at: int) -> dict[str, Any]:
    """The event for an observation that matched no pattern but changed significantly."""
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
        "triples": [_statement(t) for t in triples],
        "sensor": sensor,
        "property": prop,
        "result": result,
    }


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON, the MQTT payload."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_event(payload: bytes | str) -> dict[str, Any]:
    """Parse and check an event payload; raises EventError naming what is wrong."""
    try:
        event = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EventError(f"not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise EventError("event must be a JSON object")
    missing = [f for f in REQUIRED_FIELDS if f not in event]
    if missing:
        raise EventError(f"missing fields: {', '.join(missing)}")
    if not str(event["id"]).startswith(EVENT_ID_PREFIX):
        raise EventError(f"bad event id {event['id']!r}")
    if event["kind"] not in (KIND_MATCH, KIND_SIGNIFICANT):
        raise EventError(f"unknown kind {event['kind']!r}")
    for field in ("windowStart", "windowEnd", "emittedAt"):
        if not isinstance(event[field], int):
            raise EventError(f"{field} must be an integer (ms), got {event[field]!r}")
    return event


def bindings_dict(event: Mapping[str, Any]) -> dict[str, str]:
    """The event's bindings as {variable: term}."""
    return {b["variable"]: b["value"] for b in event.get("bindings") or ()}
