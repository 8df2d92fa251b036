"""Fuzz target: uplink batches (``edgewave.shared.uplink_batch.decode_batch``).

Documented error: ``BatchError`` (an ``EventError``). The first byte picks what the rest is:

- ``R``: a whole payload as it comes over MQTT (header, zlib body): reaches the header and
  inflating checks;
- ``Z``: a count byte, then a body as it is before compression (JSON ``[table, events]``),
  which the target compresses behind a correct header, so that the fuzzer reaches the
  table, the references and the event shapes rather than stopping at zlib's checksum.

Each input is decoded under the default limits and under small ones. An accepted batch
must survive the trip back (``decode_batch(encode_batch(events)) == events``, with and
without the table), and each of its events is checked as ingest checks it, raising
nothing but ``EventError``.
"""
from __future__ import annotations

import zlib

from edgewave.shared.events import EventError, EventLimits
from edgewave.shared.uplink_batch import (CODEC_ZLIB, FORMAT_VERSION, HEADER, MAGIC, ZDICT, BatchError, check_event,
                                          decode_batch, encode_batch)

from fuzzlib import guarded, mode_and_payload

SMALL = EventLimits(max_bytes=2048, max_depth=4, max_triples=3, max_bindings=3, max_batch_bytes=4096,
                    max_inflated_bytes=8192, max_batch_events=4)
# Re-encoded without the table, accepted strings may take several times the inflated limit
# (a reference repeated, a control character escaped): the trip back is read without limits.
ROOMY = EventLimits(max_batch_bytes=2 ** 31, max_inflated_bytes=2 ** 31, max_batch_events=0xFFFF)


def _wrapped(data: bytes) -> bytes:
    count = data[0] if data else 1
    packer = zlib.compressobj(6, zdict=ZDICT)
    return HEADER.pack(MAGIC, FORMAT_VERSION, CODEC_ZLIB, count, len(data) - 1 if data else 0) \
        + packer.compress(data[1:]) + packer.flush()


def _one(data: bytes) -> None:
    mode, rest = mode_and_payload(data, "RZ")
    payload = rest if mode == "R" else _wrapped(rest)
    for limits in (EventLimits(), SMALL):
        try:
            events = decode_batch(payload, limits)
        except BatchError:
            continue
        for shared in (True, False):
            assert decode_batch(encode_batch(events, shared_table=shared), ROOMY) == events, events
        for event in events:
            try:
                check_event(event, limits)
            except EventError:
                pass


TestOneInput = guarded(_one)
