"""JSON from outside, read within limits a hostile payload cannot get past.

``json.loads`` trusts its input: 100,000 nested ``[`` raise ``RecursionError``, a
5,000-digit number raises ``ValueError`` from ``int()`` (Python's limit on
integer digits), ``NaN`` and ``Infinity`` are accepted, and a ``\\ud800`` escape
gives a string that cannot be written back as UTF-8. Every payload that comes
over MQTT (uplink events, status messages, config acks, config envelopes) is
read through ``load_json`` instead, which checks size and nesting before the
parser runs and turns every failure into one error type, ``PayloadError``.
"""
from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_DEPTH = 32
MAX_INT_DIGITS = 20            # a signed 64-bit integer has at most 19 digits and a sign

# The JSON string grammar (RFC 8259): what lies between quotes is not structure.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class PayloadError(ValueError):
    """A payload that is not JSON within the limits; the message says which limit or error."""


def nesting_depth(data: bytes) -> int:
    """How deeply arrays and objects nest in ``data`` (brackets inside strings do not count).

    Runs in C-speed passes (two regex substitutions and one ``accumulate``), so a
    megabyte of brackets costs milliseconds, not a Python loop per byte.
    """
    if data.count(b"[") + data.count(b"{") == 0:
        return 0
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", data))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise PayloadError(f"integer with {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _no_constant(name: str) -> Any:
    raise PayloadError(f"{name} is not a JSON number")


def load_json(payload: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES,
              max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """Parse ``payload`` as UTF-8 JSON; raises PayloadError for anything else or beyond the limits."""
    data = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
    if len(data) > max_bytes:
        raise PayloadError(f"payload of {len(data)} bytes (at most {max_bytes})")
    depth = nesting_depth(data)
    if depth > max_depth:
        raise PayloadError(f"nesting depth {depth} (at most {max_depth})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"not UTF-8: {exc}") from exc
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except PayloadError:
        raise
    except (ValueError, RecursionError) as exc:   # JSONDecodeError is a ValueError
        raise PayloadError(f"not JSON: {exc}") from exc
    if "\\u" in text and _has_lone_surrogate(value):
        raise PayloadError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is not text")
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _LONE_SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
