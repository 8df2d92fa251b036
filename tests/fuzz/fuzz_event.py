"""Fuzz target: uplink event payloads (``edgewave.shared.events.decode_event``).

Documented error: ``EventError``. An accepted event must survive the trip back:
``decode_event(encode_event(event)) == event``. Each input is decoded under the default
limits and under small ones, so both the parser and the limit checks are reached.
"""
from __future__ import annotations

from edgewave.shared.events import EventError, EventLimits, decode_event, encode_event

from fuzzlib import guarded

SMALL = EventLimits(max_bytes=2048, max_depth=4, max_triples=3, max_bindings=3)


def _one(data: bytes) -> None:
    for limits in (EventLimits(), SMALL):
        try:
            event = decode_event(data, limits)
        except EventError:
            continue
        assert decode_event(encode_event(event), limits) == event, event


TestOneInput = guarded(_one)
