"""CBOR (RFC 8949) bytes to plain values: a bounded, iterative check of the bytes, then cbor2.

A payload comes from any device on the local broker, and a general CBOR decoder does
more than read plain data: cbor2 turns semantic tags into objects (regular expressions,
MIME messages parsed by the email package, sets, shared references, big decimals,
dates...) and may allocate from a declared length. So ``check_cbor`` first walks the
bytes itself, one item head at a time, with its own stack (no recursion), and checks
every declared length and count against the bytes that remain; only bytes it accepts
reach ``cbor2.loads``. What it accepts:

- major types 0 and 1 (integers; one that would be more than 20 characters in JSON,
  below -9999999999999999999, is ``not_finite`` as in the JSON path), 2 and 3 (byte
  and text strings of definite length, as RFC 8428 section 6 asks; text must be UTF-8,
  which cbor2 checks strictly, so invalid bytes and encoded surrogates are
  ``malformed``), 4 and 5 (arrays and maps, of definite length or indefinite up to
  their break; map keys are integers or text, each once), and of major type 7 only
  ``false``, ``true``, ``null`` and half, single and double floats (NaN and the
  infinities are ``not_finite``, read from the exponent bits);
- no tags (major type 6): any tag is ``malformed``, whatever its number; nor
  ``undefined``, other simple values, or reserved heads.

Bounds (``PayloadLimits``): the size first (``oversized``); arrays and maps nested deeper
than ``max_depth`` (``too_deep``); more array items plus map pairs than ``max_entries``
(``too_many_entries``, counted from each declared count before anything is allocated).

Why a check and then cbor2, rather than the walk building the values too: the check
only moves a position and a few counters per item, and cbor2's C decoder builds the
values of bytes known to be plain, bounded data in a fraction of the check's time; the
walk building them in Python took about twice as long as both together on SenML packs.
"""
from __future__ import annotations

from typing import Any

from .errors import MALFORMED, NOT_FINITE, OVERSIZED, TOO_DEEP, TOO_MANY_ENTRIES, PayloadRejected
from .limits import PayloadLimits

try:
    import cbor2
except ImportError:             # an authoring tool without the agent extra: mappings compile, CBOR is refused
    cbor2 = None

_MIN_NEGATIVE_ARGUMENT = 10 ** 19 - 1     # -1 - this is -10**19: 21 characters, beyond the JSON path's 20
_PLAIN_SIMPLE = (20, 21, 22, 25, 26, 27)  # false, true, null, half, single, double
_MAJOR_NAMES = ("an unsigned integer", "a negative integer", "a byte string", "a text string", "an array",
                "a map", "a tag", "a simple value")


def _malformed(detail: str) -> PayloadRejected:
    return PayloadRejected(MALFORMED, f"not CBOR within edgewave's subset: {detail}")


def check_cbor(data: bytes, limits: PayloadLimits) -> None:
    """PayloadRejected unless ``data`` is exactly one CBOR data item of plain data within ``limits``.

    Each open array or map is one number on the stack: the items it still expects (a
    map: twice its pairs, so that an even count means a key comes next), or, when of
    indefinite length, -1 minus the items read so far (odd count read: a key comes next).
    """
    n = len(data)
    if n > limits.max_bytes:
        raise PayloadRejected(OVERSIZED, f"{n} bytes (at most {limits.max_bytes})")
    if not n:
        raise PayloadRejected(MALFORMED, "an empty payload")
    max_depth, max_entries = limits.max_depth, limits.max_entries
    stack: list[int] = []
    is_map: list[bool] = []
    entries = 0
    pos = 0
    while True:
        if pos >= n:
            raise _malformed(f"the payload ends inside {len(stack)} unfinished array(s) or map(s)")
        where = pos
        head = data[pos]
        pos += 1
        major, info = head >> 5, head & 31
        if is_map and is_map[-1] and head != 0xFF and stack[-1] % 2 == (0 if stack[-1] >= 0 else 1) \
                and major not in (0, 1, 3):
            raise _malformed(f"the map key at byte {where} is {_MAJOR_NAMES[major]}, not an integer or text")
        if info < 24:
            argument = info
        elif info < 28:
            size = 1 << (info - 24)                 # 24: 1 byte, 25: 2, 26: 4, 27: 8
            if size > n - pos:
                raise _malformed(f"the item at byte {where} is cut short")
            argument = int.from_bytes(data[pos:pos + size], "big")
            if major == 7:
                first = data[pos]
                if (info == 25 and first & 0x7C == 0x7C) or (info == 26 and first & 0x7F == 0x7F and data[pos + 1]
                                                               & 0x80) \
                        or (info == 27 and first & 0x7F == 0x7F and data[pos + 1] & 0xF0 == 0xF0):
                    raise PayloadRejected(NOT_FINITE, f"the float at byte {where} is NaN or infinite")
            pos += size
        elif head == 0xFF:                          # the break that ends an indefinite array or map
            if not stack or stack[-1] >= 0:
                raise _malformed(f"a break at byte {where} ends nothing")
            if is_map[-1] and stack[-1] % 2 == 0:
                raise _malformed(f"the map ending at byte {where} has a key without its value")
            stack.pop()
            is_map.pop()
            major = -1                              # the closed container is one item of its parent
        elif info == 31 and (major == 4 or major == 5):
            if len(stack) >= max_depth:
                raise PayloadRejected(TOO_DEEP, f"more than {max_depth} nested arrays and maps")
            stack.append(-1)
            is_map.append(major == 5)
            continue
        else:
            kind = "an indefinite-length string (RFC 8428 asks for definite ones)" if info == 31 and major in (2, 3) \
                else f"{_MAJOR_NAMES[major]} with a reserved or indefinite head (0x{head:02x})"
            raise _malformed(f"{kind} at byte {where}")
        if major == 2 or major == 3:
            if argument > n - pos:
                raise _malformed(f"the string at byte {where} declares {argument} bytes, {n - pos} remain")
            pos += argument
        elif major == 4 or major == 5:
            if len(stack) >= max_depth:
                raise PayloadRejected(TOO_DEEP, f"more than {max_depth} nested arrays and maps")
            items = argument * 2 if major == 5 else argument     # every item takes at least one byte
            if items > n - pos:
                raise _malformed(f"{_MAJOR_NAMES[major]} at byte {where} declares {argument} "
                                 f"{'pairs' if major == 5 else 'items'}, {n - pos} bytes remain")
            entries += argument
            if entries > max_entries:
                raise PayloadRejected(TOO_MANY_ENTRIES, f"more than {max_entries} array items and map pairs")
            if items:
                stack.append(items)
                is_map.append(major == 5)
                continue
        elif major == 1:
            if argument >= _MIN_NEGATIVE_ARGUMENT:
                raise PayloadRejected(NOT_FINITE, f"the integer at byte {where} has more than 20 characters")
        elif major == 6:
            raise _malformed(f"tag {argument} at byte {where}: tags are not read (a device payload is plain data)")
        elif major == 7 and info not in _PLAIN_SIMPLE:
            raise _malformed(f"the simple value at byte {where} (0x{head:02x}) is not false, true, null or a float")
        # One item is complete: count it in the containers it fills, closing those it completes.
        while stack:
            left = stack[-1]
            if left < 0:                            # indefinite: count what was read
                stack[-1] = left - 1
                if not is_map[-1] or left % 2 == 0:  # an array item, or a map's value: one more entry
                    entries += 1
                    if entries > max_entries:
                        raise PayloadRejected(TOO_MANY_ENTRIES, f"more than {max_entries} array items and map "
                                                                "pairs")
                break
            if left > 1:
                stack[-1] = left - 1
                break
            stack.pop()
            is_map.pop()
        else:
            if pos != n:
                raise _malformed(f"{n - pos} bytes follow the data item")
            return


def decode_cbor(payload: bytes, limits: PayloadLimits) -> Any:
    """The value of one CBOR data item filling ``payload`` (int, float, bool, None, str, bytes, list,
    dict), or PayloadRejected naming the limit or the error."""
    data = bytes(payload)
    check_cbor(data, limits)
    if cbor2 is None:
        raise PayloadRejected(MALFORMED, "CBOR needs the cbor2 package (edgewave[agent])")
    try:
        return cbor2.loads(data, allow_duplicate_keys=False, max_depth=limits.max_depth + 1,
                           allow_indefinite=True)
    except cbor2.CBORDecodeError as exc:     # text that is not UTF-8, a key given twice
        raise _malformed(str(exc)[:120]) from None
