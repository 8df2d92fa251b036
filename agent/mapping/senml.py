"""SenML packs (RFC 8428) resolved into records a mapping iterates over.

Resolution follows section 4.6: base fields (``bn``, ``bt``, ``bu``, ``bv``, ``bs``) apply to
their record and every later one until set again; the resolved name is ``bn`` + ``n``, the
time ``bt`` + ``t``, a value ``bv`` + ``v``, a sum ``bs`` + ``s``, the unit ``u`` else ``bu``. A
time below 2**28 is relative to now (the message's arrival). A record with neither a value
nor a sum only sets base fields and is not one of the resolved records.

Each resolved record is a JSON object with ``n`` (the resolved name), ``name`` (the
record's own ``n``, without the base name: what a mapping matches so that it does not
depend on the device's base name; an edgewave addition), ``t`` (absolute time, seconds),
``u`` when known, and whichever of ``v``, ``vs``, ``vb``, ``vd``, ``s`` it has. Its time in
epoch milliseconds (``time_ms``) and whether the payload gave it (``payload_time``: an
absolute time) ride along as attributes for ``ew:resultTime``.

A pack in CBOR (section 6) is first turned into the records its JSON form would hold
(``from_cbor``): the integer labels of Table 4 become their names, a data value (a byte
string) its base64url text without padding as JSON carries it, and text labels stay as
they are (extensions); the records are then resolved alike.
"""
from __future__ import annotations

import base64
import math
import re
from typing import Any

from .errors import MALFORMED, NOT_FINITE, WRONG_TYPE, PayloadRejected

RELATIVE_LIMIT = 2 ** 28                  # RFC 8428 4.5.3: times below this are relative to now
MAX_TIME_MS = 253402300799999             # 9999-12-31T23:59:59.999Z: beyond it is no xsd:dateTime we write
_NAME = re.compile(r"[A-Za-z0-9][-:./_A-Za-z0-9]*")
_STRING_FIELDS = ("bn", "bu", "n", "u", "vs", "vd")
_NUMBER_FIELDS = ("bt", "bv", "bs", "t", "v", "s", "ut", "bver")
_VALUE_FIELDS = ("v", "vs", "vb", "vd")
CBOR_LABELS = {-1: "bver", -2: "bn", -3: "bt", -4: "bu", -5: "bv", -6: "bs",
               0: "n", 1: "u", 2: "v", 3: "vs", 4: "vb", 5: "s", 6: "t", 7: "ut", 8: "vd"}
"""RFC 8428 Table 4: the CBOR representation's integer map keys (conclusive: extensions use text keys)."""


class SenMLRecord(dict):
    """A resolved record: a plain JSON object to the mapping, with its time alongside."""

    __slots__ = ("time_ms", "payload_time")


def _check_types(record: dict, index: int) -> None:
    for key, value in record.items():
        if key in _STRING_FIELDS:
            if type(value) is not str:
                raise PayloadRejected(WRONG_TYPE, f"record {index}: {key} must be a string")
        elif key in _NUMBER_FIELDS:
            if type(value) not in (int, float):
                raise PayloadRejected(WRONG_TYPE, f"record {index}: {key} must be a number")
            if type(value) is float and not math.isfinite(value):
                raise PayloadRejected(NOT_FINITE, f"record {index}: {key} is not a finite number")
        elif key == "vb":
            if type(value) is not bool:
                raise PayloadRejected(WRONG_TYPE, f"record {index}: vb must be a boolean")
        elif key.endswith("_"):
            raise PayloadRejected(MALFORMED, f"record {index}: field {key!r} must be understood "
                                             "(RFC 8428 4.4) and is not")


def resolve(pack: Any, arrival_ms: int) -> list[SenMLRecord]:
    """The resolved records of a SenML pack (a JSON array of objects), in order."""
    if type(pack) is not list:
        raise PayloadRejected(MALFORMED, "a SenML pack is a JSON array of records")
    base_name, base_time, base_unit, base_value, base_sum = "", 0.0, None, 0, 0
    out: list[SenMLRecord] = []
    for index, record in enumerate(pack):
        if type(record) is not dict:
            raise PayloadRejected(MALFORMED, f"record {index} is not a JSON object")
        _check_types(record, index)
        base_name = record.get("bn", base_name)
        base_time = record.get("bt", base_time)
        base_unit = record.get("bu", base_unit)
        base_value = record.get("bv", base_value)
        base_sum = record.get("bs", base_sum)
        values = [k for k in _VALUE_FIELDS if k in record]
        if len(values) > 1:
            raise PayloadRejected(MALFORMED, f"record {index} has more than one value ({', '.join(values)})")
        if not values and "s" not in record:
            continue
        own_name = record.get("n", "")
        name = base_name + own_name
        if not _NAME.fullmatch(name):
            raise PayloadRejected(MALFORMED, f"record {index}: {name[:80]!r} is not a SenML name")
        time = base_time + record.get("t", 0)
        payload_time = abs(time) >= RELATIVE_LIMIT
        if not math.isfinite(time) or abs(time) * 1000 > MAX_TIME_MS:
            raise PayloadRejected(NOT_FINITE, f"record {index}: time {time!r} is out of range")
        time_ms = round(time * 1000) if payload_time else arrival_ms + round(time * 1000)
        if not 0 <= time_ms <= MAX_TIME_MS:
            raise PayloadRejected(NOT_FINITE, f"record {index}: time {time!r} is out of range")
        resolved = SenMLRecord(n=name, name=own_name, t=time_ms / 1000)
        resolved.time_ms = time_ms
        resolved.payload_time = payload_time
        unit = record.get("u", base_unit)
        if unit is not None:
            resolved["u"] = unit
        if values:
            key = values[0]
            value = record[key]
            if key == "v":
                value = base_value + value
                if type(value) is float and not math.isfinite(value):
                    raise PayloadRejected(NOT_FINITE, f"record {index}: bv + v is not a finite number")
            resolved[key] = value
        if "s" in record:
            total = base_sum + record["s"]
            if type(total) is float and not math.isfinite(total):
                raise PayloadRejected(NOT_FINITE, f"record {index}: bs + s is not a finite number")
            resolved["s"] = total
        out.append(resolved)
    return out


def from_cbor(pack: Any) -> list[dict]:
    """The records of a decoded SenML CBOR pack with JSON's labels (see the module's text), unresolved."""
    if type(pack) is not list:
        raise PayloadRejected(MALFORMED, "a SenML pack is a CBOR array of records")
    records = []
    for index, record in enumerate(pack):
        if type(record) is not dict:
            raise PayloadRejected(MALFORMED, f"record {index} is not a CBOR map")
        fields = {}
        for key, value in record.items():
            if type(key) is int:
                label = CBOR_LABELS.get(key)
                if label is None:
                    raise PayloadRejected(MALFORMED, f"record {index}: {key} is no SenML label (RFC 8428 "
                                                     "Table 4; extensions use text labels)")
                if label == "vd" and type(value) is not bytes:
                    raise PayloadRejected(WRONG_TYPE, f"record {index}: vd must be a byte string")
            else:
                label = key
            if label == "vd" and type(value) is bytes:
                value = base64.urlsafe_b64encode(value).rstrip(b"=").decode("ascii")
            if label in fields:
                raise PayloadRejected(MALFORMED, f"record {index} has the field {label!r} twice")
            fields[label] = value
        records.append(fields)
    return records
