"""Payload bytes to the value a mapping iterates over, bounded before anything is parsed.

Formats (``ew:payloadFormat``): ``json`` (one JSON document), ``text`` (a UTF-8 value such as
ESPHome's ``21.5`` or ``ON``, surrounding white space dropped; the document is that
string), ``senml+json`` (a SenML pack, resolved record by record, see ``senml.py``),
``senml+cbor`` (a SenML pack in CBOR, RFC 8428 section 6: read by the bounded walk of
``cbor_walk.py``, its integer labels turned into JSON's, then resolved alike).

Limits are checked in C-speed passes before ``json.loads`` runs: size; nesting (counted
only when the payload holds more brackets than the limit, so ordinary payloads cost one
``bytes.count``); entries (commas and brackets bound the number of array items and object
members from above; strings are blanked out only when that bound is over the limit).
Integers of more than 20 digits, ``NaN`` and ``Infinity`` are refused while parsing.
"""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from edgewave.shared.bounded_json import MAX_INT_DIGITS, nesting_depth

from .cbor_walk import decode_cbor
from .errors import MALFORMED, NOT_FINITE, OVERSIZED, TOO_DEEP, TOO_MANY_ENTRIES, PayloadRejected
from .limits import PayloadLimits
from .senml import from_cbor

FORMATS = ("json", "text", "senml+json", "senml+cbor")
SENML_FORMATS = ("senml+json", "senml+cbor")      # the decoded value is a pack, resolved by the caller

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise PayloadRejected(NOT_FINITE, f"an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise PayloadRejected(NOT_FINITE, f"{name} is not a JSON number")


def _check_size(payload: bytes, limits: PayloadLimits) -> None:
    if len(payload) > limits.max_bytes:
        raise PayloadRejected(OVERSIZED, f"{len(payload)} bytes (at most {limits.max_bytes})")


def decode_json(payload: bytes, limits: PayloadLimits) -> Any:
    """The JSON value of ``payload``, or PayloadRejected naming the limit or the error."""
    _check_size(payload, limits)
    brackets = payload.count(b"[") + payload.count(b"{")
    if brackets > limits.max_depth:
        depth = nesting_depth(payload)
        if depth > limits.max_depth:
            raise PayloadRejected(TOO_DEEP, f"nesting depth {depth} (at most {limits.max_depth})")
    if payload.count(b",") + brackets > limits.max_entries:
        plain = _STRING.sub(b'""', payload)
        entries = plain.count(b",") + plain.count(b"[") + plain.count(b"{")
        if entries > limits.max_entries:
            raise PayloadRejected(TOO_MANY_ENTRIES, f"about {entries} entries (at most {limits.max_entries})")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadRejected(MALFORMED, f"not UTF-8: {exc}") from None
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except PayloadRejected:
        raise
    except (ValueError, RecursionError) as exc:        # JSONDecodeError is a ValueError
        raise PayloadRejected(MALFORMED, f"not JSON: {exc}") from None
    if "\\u" in text and _has_lone_surrogate(value):
        raise PayloadRejected(MALFORMED, "a string holds a lone UTF-16 surrogate, which is not text")
    return value


def decode_text(payload: bytes, limits: PayloadLimits) -> str:
    """The text value of ``payload`` without surrounding white space; empty is malformed."""
    _check_size(payload, limits)
    try:
        text = payload.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise PayloadRejected(MALFORMED, f"not UTF-8: {exc}") from None
    if not text:
        raise PayloadRejected(MALFORMED, "an empty payload")
    return text


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if _LONE_SURROGATE.search(item):
                return True
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def decode_senml_cbor(payload: bytes, limits: PayloadLimits) -> list[dict]:
    """The records of a SenML CBOR pack with JSON's labels (not resolved), within ``limits``."""
    return from_cbor(decode_cbor(payload, limits))


def decoder(payload_format: str) -> Callable[[bytes, PayloadLimits], Any]:
    """The function that reads a payload of ``payload_format`` (SenML: the pack's records, resolved by the caller)."""
    if payload_format == "text":
        return decode_text
    if payload_format == "senml+cbor":
        return decode_senml_cbor
    return decode_json
