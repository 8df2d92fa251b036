"""Fuzz target: device payloads through the compiled mapping presets (``edgewave.agent.mapping``).

The first byte picks the preset: ``Z`` zigbee2mqtt, ``T`` tasmota, ``E`` esphome (every
entity topic), ``S`` senml, ``C`` senml-cbor (SenML in CBOR: the bounded check of the bytes,
then cbor2); the rest is the MQTT payload. Documented error:
``PayloadRejected`` with a reason from ``REASONS`` (never the catch-all ``decoder error``,
which would be a bug caught inside ``map``). Accepted triples are canonical N-Triples:
each serializes and parses back to itself; a message never yields more than the limit.
"""
from __future__ import annotations

from edgewave.agent.mapping import REASONS, PayloadLimits, PayloadRejected, compile_mappings, preset_triples
from edgewave.shared.ntriples import parse_line, serialize

from fuzzlib import guarded, mode_and_payload

PRESET_OF = {"Z": "zigbee2mqtt", "T": "tasmota", "E": "esphome", "S": "senml", "C": "senml-cbor"}
SMALL = PayloadLimits(max_bytes=512, max_depth=4, max_entries=16, max_triples=8)
ROUTES = {
    mode: [route for limits in (PayloadLimits(), SMALL) for route in compile_mappings(
        preset_triples(name, stream="http://example.org/stream/building", base_iri="http://example.org/gw1/"),
        limits=limits)]
    for mode, name in PRESET_OF.items()}


def _topic(filter_: str) -> str:
    return filter_.replace("+", "dev-1").replace("#", "a/b")


def _one(data: bytes) -> None:
    mode, payload = mode_and_payload(data, "ZTESC")
    for route in ROUTES[mode]:
        try:
            triples = route.map(payload, _topic(route.topic_filter), 1_764_407_663_123)
        except PayloadRejected as exc:
            assert exc.reason in REASONS, exc.reason
            assert not exc.detail.startswith("decoder error"), exc.detail
            continue
        assert 0 < len(triples) <= route.limits.max_triples
        for triple in triples:
            assert parse_line(serialize(triple)) == triple, triple


TestOneInput = guarded(_one)
