"""From JSON values to RDF terms: templates, lexical forms, IRIs, literals, blank nodes.

Everything here is decided at compile time where it can be (a template's parts, a
datatype's lexical rule), so that per message only the values are turned into terms.
Terms are canonical N-Triples strings (docs/ARCHITECTURE.md, "Terms and triples").
"""
from __future__ import annotations

import math
import re
from functools import lru_cache
from datetime import datetime, timezone
from typing import Any, Callable

from edgewave.shared import vocab
from edgewave.shared.decimal_lexical import decimal_lexical

from .errors import INVALID_TERM, NOT_FINITE, WRONG_TYPE, MappingError, PayloadRejected

XSD = vocab.XSD_NS
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\\ud800-\udfff]')
_LANGUAGE_TAG = re.compile(r"(?:[a-zA-Z]{2,8}|[xXiI])(?:-[a-zA-Z0-9]{1,8})*")
_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_INTEGER_TEXT = re.compile(r"[+-]?\d+")
_DOUBLE_TEXT = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?INF|NaN")
_MAX_NUMBER_TEXT = 40           # a longer numeric string is refused rather than read through a float
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9]")


# --- templates ------------------------------------------------------------------------

def parse_template(template: str) -> list[tuple[str, str]]:
    """A template as parts ``("text", s)`` and ``("reference", r)``.

    ``\\{``, ``\\}`` and ``\\\\`` stand for the character (inside a reference too); a
    backslash before anything else, ``{`` inside a reference, an unclosed ``{``, a stray
    ``}`` or an empty ``{}`` is a MappingError.
    """
    parts: list[tuple[str, str]] = []
    text: list[str] = []
    reference: list[str] | None = None
    i = 0
    while i < len(template):
        c = template[i]
        if c == "\\":
            nxt = template[i + 1:i + 2]
            if nxt not in ("{", "}", "\\"):
                raise MappingError(f"template {template!r}: '\\' may only escape '{{', '}}' or '\\' "
                                   f"(character {i + 1})")
            (text if reference is None else reference).append(nxt)
            i += 2
            continue
        if c == "{":
            if reference is not None:
                raise MappingError(f"template {template!r}: '{{' inside a reference (character {i + 1})")
            if text:
                parts.append(("text", "".join(text)))
                text = []
            reference = []
        elif c == "}":
            if reference is None:
                raise MappingError(f"template {template!r}: '}}' without '{{' (character {i + 1})")
            if not reference:
                raise MappingError(f"template {template!r}: empty reference '{{}}'")
            parts.append(("reference", "".join(reference)))
            reference = None
        else:
            (text if reference is None else reference).append(c)
        i += 1
    if reference is not None:
        raise MappingError(f"template {template!r}: '{{' is never closed")
    if text:
        parts.append(("text", "".join(text)))
    return parts


_IUNRESERVED_ASCII = re.compile(r"[A-Za-z0-9\-._~]*").fullmatch


@lru_cache(maxsize=4096)        # device names and keys repeat message after message
def iri_safe(text: str, keep_unicode: bool = True) -> str:
    """RML's IRI-safe form of a value put into a template: everything outside ``iunreserved``
    (ASCII letters, digits, ``-._~`` and, for IRIs, non-ASCII characters) percent-encoded as
    UTF-8. For ``rml:URI`` (``keep_unicode=False``) non-ASCII characters are encoded too."""
    if _IUNRESERVED_ASCII(text):
        return text
    out = []
    for c in text:
        if c.isascii():
            if c.isalnum() or c in "-._~":
                out.append(c)
                continue
        elif keep_unicode and ord(c) >= 0xA0 and not 0xD800 <= ord(c) <= 0xDFFF and ord(c) not in (0xFFFE, 0xFFFF):
            out.append(c)
            continue
        out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
    return "".join(out)


# --- lexical forms ----------------------------------------------------------------------

def value_lexical(value: Any) -> str:
    """A JSON scalar as text (in templates and untyped literals): strings as they are,
    ``true``/``false``, integers in full, other numbers in the shortest decimal form."""
    t = type(value)
    if t is str:
        return value
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return str(value)
    if t is float:
        if not math.isfinite(value):
            raise PayloadRejected(NOT_FINITE, f"{value!r} is not a finite number")
        return decimal_lexical(value)
    raise PayloadRejected(WRONG_TYPE, f"a {_json_type(value)} where a string, number or boolean was expected")


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def _number(value: Any, datatype: str) -> float | int:
    t = type(value)
    if t is int:
        return value
    if t is float:
        if not math.isfinite(value):
            raise PayloadRejected(NOT_FINITE, f"{value!r} is not a finite number")
        return value
    if t is str and len(value) <= _MAX_NUMBER_TEXT:
        text = value.strip()
        if _INTEGER_TEXT.fullmatch(text):
            return int(text)
        if _DOUBLE_TEXT.fullmatch(text):
            number = float(text)
            if not math.isfinite(number):
                raise PayloadRejected(NOT_FINITE, f"{value!r} is not a finite number")
            return number
        if text.lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
            raise PayloadRejected(NOT_FINITE, f"{value!r} is not a finite number")
    raise PayloadRejected(WRONG_TYPE, f"{_short(value)} is not a number (for {datatype})")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def decimal_text(value: Any) -> str:
    number = _number(value, "xsd:decimal")
    return str(number) if type(number) is int else decimal_lexical(number)


def integer_text(value: Any) -> str:
    number = _number(value, "xsd:integer")
    if type(number) is float:
        if not number.is_integer():
            raise PayloadRejected(WRONG_TYPE, f"{_short(value)} is not an integer")
        return str(int(number))
    return str(number)


def double_text(value: Any) -> str:
    number = float(_number(value, "xsd:double"))
    if number == 0:
        return "0.0E0"
    digits = repr(number)                       # the shortest round-trip digits
    if "e" in digits or "E" in digits:
        m, _, e = digits.lower().partition("e")
        mantissa, exponent = m, e
    else:
        sign = "-" if number < 0 else ""
        whole, _, frac = digits.lstrip("-").partition(".")
        figures = (whole + frac).lstrip("0")
        shift = len(whole) - 1 if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")) + 1)
        figures = figures.rstrip("0") or "0"
        mantissa = sign + figures[0] + "." + (figures[1:] or "0")
        exponent = str(shift)
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def boolean_text(value: Any) -> str:
    if value is True or value == "true":
        return "true"
    if value is False or value == "false":
        return "false"
    raise PayloadRejected(WRONG_TYPE, f"{_short(value)} is not a boolean")


_TYPED: dict[str, Callable[[Any], str]] = {
    f"<{XSD}decimal>": decimal_text,
    **{f"<{XSD}{name}>": integer_text for name in (
        "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
        "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
        "unsignedByte")},
    f"<{XSD}double>": double_text,
    f"<{XSD}float>": double_text,
    f"<{XSD}boolean>": boolean_text,
}


def lexical_rule(datatype: str | None) -> Callable[[Any], str]:
    """How a value becomes the lexical form of a literal of ``datatype`` (an IRI term).

    Numbers and booleans are checked and written canonically (numeric strings too, so
    ``"21.50"`` as xsd:decimal is ``"21.5"``); any other datatype takes the value's text."""
    return _TYPED.get(datatype or "", value_lexical)


def escape_lexical(text: str) -> str:
    """The canonical N-Triples escaping of a literal's lexical form."""
    if "\\" in text or '"' in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return text


def literal_suffix(datatype: str | None, language: str | None) -> str:
    """What follows a literal's closing quote: ``@lang``, ``^^<datatype>`` or nothing (xsd:string)."""
    if language is not None:
        return "@" + language.lower()
    if datatype is None or datatype == vocab.XSD_STRING:
        return ""
    return "^^" + datatype


def natural_literal(value: Any) -> str:
    """A JSON scalar as the literal RML-Core gives it without a datatype: strings plain,
    booleans xsd:boolean, integers xsd:integer, other numbers xsd:double."""
    t = type(value)
    if t is str:
        return f'"{escape_lexical(value)}"'
    if t is bool:
        return f'"{"true" if value else "false"}"^^{vocab.XSD_BOOLEAN}'
    if t is int:
        return f'"{value}"^^{vocab.XSD_INTEGER}'
    if t is float:
        return f'"{double_text(value)}"^^{vocab.XSD_DOUBLE}'
    raise PayloadRejected(WRONG_TYPE, f"a {_json_type(value)} where a string, number or boolean was expected")


def check_language(tag: str) -> str:
    if not _LANGUAGE_TAG.fullmatch(tag):
        raise MappingError(f"rml:language {tag!r} is not a language tag (BCP 47)")
    return tag.lower()


# --- IRIs and blank nodes -----------------------------------------------------------------

def is_absolute(iri: str) -> bool:
    return _SCHEME.match(iri) is not None


def check_base(base: str, where: str) -> str:
    if not is_absolute(base) or _IRI_FORBIDDEN.search(base):
        raise MappingError(f"{where}: base IRI {base!r} is not an absolute IRI")
    return base


def iri_term(iri: str, base: str | None) -> str:
    """``<iri>``, resolved against ``base`` when relative (by concatenation: a base ends in
    ``/`` or ``#``, and the templates that use one write a path below it)."""
    if _IRI_FORBIDDEN.search(iri):
        raise PayloadRejected(INVALID_TERM, f"{_short(iri)} holds characters an IRI may not")
    if not is_absolute(iri):
        if base is None:
            raise PayloadRejected(INVALID_TERM, f"{_short(iri)} is a relative IRI and there is no base")
        iri = base + iri
    return f"<{iri}>"


def blank_term(value: str) -> str:
    """A blank node named by a value: letters and digits kept, every other character as ``-XX``."""
    if not value:
        raise PayloadRejected(INVALID_TERM, "an empty value names no blank node")
    label = _LABEL_UNSAFE.sub(lambda m: "".join(f"-{b:02X}" for b in m.group().encode("utf-8", "surrogatepass")),
                              value)
    return "_:" + ("b" + label if label[0] == "-" else label)


# --- time ---------------------------------------------------------------------------------

@lru_cache(maxsize=1024)        # the observations of one message share their time
def iso_time(ms: int) -> str:
    """Epoch milliseconds as the xsd:dateTime lexical form firmware writes (UTC, milliseconds, ``Z``)."""
    moment = datetime.fromtimestamp(ms // 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
