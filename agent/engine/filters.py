"""FILTER expressions compiled to nested closures over a row of terms.

The RSP-QL parser (``rspql``) turns a FILTER into a small expression tree (plain tuples, see
``Expr`` below); this module turns that tree into a :class:`~edgewave.agent.engine.query.Filter`
whose ``bind(slots)`` builds, once per join node, a predicate over a sequence of canonical
N-Triples terms. Evaluating it walks no tree: every node is a closure that calls its children
directly, and literal terms are converted to Python values through a bounded cache.

Semantics follow SPARQL 1.1 (section 17): a type error (comparing a string with a number, an
unbound variable, a malformed literal in arithmetic, ...) is raised as :class:`EvalError` inside
the closures; ``||`` and ``&&`` apply SPARQL's three-valued error logic, and the predicate
returned by ``bind`` turns a remaining error into False, so the row is dropped.

Values inside an evaluation are Python objects: ``bool``, ``int`` (xsd:integer and its derived
types), ``Decimal`` (xsd:decimal), ``float`` (xsd:double), :class:`Single` (xsd:float),
``datetime`` (xsd:dateTime), :class:`Date` (xsd:date), ``str`` (simple literals and
xsd:string), :class:`LangString`, :class:`Resource` (IRIs, blank nodes, quoted triples) and
:class:`OtherLiteral` (unknown datatypes and ill-typed literals, which only compare equal to
themselves).

Equality goes a step beyond RDFterm-equal where the W3C test suite (open-world) expects it:
a language-tagged string is unequal to every other kind of literal (typed, simple, or of an
unknown datatype), and an xsd:date to every xsd:dateTime, rather than a type error. Other
literals of different types (a string and a number, say) stay a type error both ways, as
RDFterm-equal says. Time instants follow XSD's partial order: one with a time zone and one
without are ordered only when they are more than 14 hours apart, and are an error otherwise.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, Callable, NamedTuple, Sequence

from edgewave.shared.ntriples import VALUE_CACHE_SIZE, is_blank, is_iri, is_literal, is_quoted, literal_parts
from edgewave.shared.vocab import RDF_NS, XSD_NS, XSD_STRING

from .query import Filter, Term

RDF_LANGSTRING = f"<{RDF_NS}langString>"

# An expression tree node, as built by the parser:
#   ("var", name) | ("const", term) | ("or", a, b) | ("and", a, b) | ("not", a)
#   ("cmp", op, a, b)  op in = != < > <= >=      | ("arith", op, a, b)  op in + - * /
#   ("neg", a) | ("pos", a) | ("call", NAME, [args])  NAME upper-case builtin
#   ("cast", datatype_iri_without_brackets, arg) | ("in", a, [items], negated)
Expr = tuple
Row = Sequence[Term]
Closure = Callable[[Row], Any]


class EvalError(Exception):
    """A SPARQL type error during evaluation; makes the enclosing FILTER false."""


class FilterCompileError(ValueError):
    """A FILTER that can never be evaluated (unknown function, wrong arity, bad constant regex)."""


class LangString(NamedTuple):
    lexical: str
    lang: str


class Resource(NamedTuple):
    """An IRI, blank node or quoted triple: compared by term identity only."""

    term: str
    kind: str  # "iri", "bnode" or "quoted"


class Single(float):
    """An xsd:float value. A double is a plain ``float``; the two differ in their datatype
    (DATATYPE, the term of a computed value) and in type promotion."""

    __slots__ = ()


class Date(NamedTuple):
    """An xsd:date, as its first instant (midnight; naive when the literal has no time zone)."""

    start: datetime


class Duration(NamedTuple):
    """An xsd:duration (and its dayTimeDuration/yearMonthDuration kinds): months and seconds
    kept apart, as XSD does. Two durations are ordered when both are day-time (months 0) or
    both year-month (seconds 0); ``P1M`` and ``P30D`` are not (a type error). A number
    compared with a day-time duration is a count of milliseconds (``getDURATION() < 30000``)."""

    months: int
    seconds: Decimal


class OtherLiteral(NamedTuple):
    """A literal of a datatype we do not interpret, or an ill-typed one ("abc"^^xsd:integer)."""

    term: str
    lexical: str
    datatype: str  # IRI without brackets


# --------------------------------------------------------------------------- terms -> values

_INTEGER_TYPES = {
    XSD_NS + t
    for t in (
        "integer", "int", "long", "short", "byte", "nonNegativeInteger", "positiveInteger",
        "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
        "unsignedByte",
    )
}
_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")
_DECIMAL_RE = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)\Z")
_DOUBLE_RE = re.compile(r"([+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?INF|NaN)\Z")
_DATE_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(Z|[+-][0-9]{2}:[0-9]{2})?\Z")
_DATETIME_RE = re.compile(
    r"(-?[0-9]{4,})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})?\Z"
)
def _parse_datetime(lexical: str) -> datetime | None:
    m = _DATETIME_RE.match(lexical)
    if not m or m.group(1).startswith("-") or len(m.group(1)) != 4:
        return None
    fraction = (m.group(7) or "")[:7]  # Python keeps microseconds
    zone = m.group(8) or ""
    if zone == "Z":
        zone = "+00:00"
    try:
        return datetime.fromisoformat(lexical[: m.start(7) if m.group(7) else m.end(6)] + fraction + zone)
    except ValueError:
        return None


def _parse_date(lexical: str) -> Date | None:
    m = _DATE_RE.match(lexical)
    if not m:
        return None
    zone = m.group(4) or ""
    try:
        return Date(datetime.fromisoformat(lexical[: m.end(3)] + "T00:00:00" + ("+00:00" if zone == "Z" else zone)))
    except ValueError:
        return None


_INT_DIGITS_MAX = 4000
_DURATION_RE = re.compile(
    r"(-)?P(?:([0-9]+)Y)?(?:([0-9]+)M)?(?:([0-9]+)D)?"
    r"(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+(?:\.[0-9]+)?)S)?)?\Z")
_DURATION_TYPES = {XSD_NS + "duration", XSD_NS + "dayTimeDuration", XSD_NS + "yearMonthDuration"}


def _parse_duration(lexical: str) -> Duration | None:
    m = _DURATION_RE.match(lexical)
    if not m or lexical.endswith(("P", "T")) or not any(m.group(i) for i in range(2, 8)):
        return None
    sign = -1 if m.group(1) else 1
    years, months, days, hours, minutes = (int(m.group(i) or 0) for i in range(2, 7))
    seconds = Decimal(m.group(7) or 0) + 60 * minutes + 3600 * hours + 86400 * days
    return Duration(sign * (12 * years + months), sign * seconds)


def duration_ms(ms: int) -> Duration:
    """A length of stream time in milliseconds as a day-time duration (``getDURATION()``)."""
    return Duration(0, Decimal(ms) / 1000)


def _duration_lexical(value: Duration) -> str:
    months, seconds = value.months, value.seconds
    if months == 0 and seconds == 0:
        return "PT0S"
    negative = months < 0 or seconds < 0
    months, seconds = abs(months), abs(seconds)
    text = "-P" if negative else "P"
    if months:
        text += (f"{months // 12}Y" if months // 12 else "") + (f"{months % 12}M" if months % 12 else "")
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, rest = divmod(rest, 60)
    if days:
        text += f"{int(days)}D"
    if hours or minutes or rest:
        text += "T" + (f"{int(hours)}H" if hours else "") + (f"{int(minutes)}M" if minutes else "")
        if rest:
            text += f"{_decimal_lexical(Decimal(rest)).rstrip('0').rstrip('.')}S"
    return text


def _typed_value(term: str, lexical: str, datatype: str) -> Any:
    if datatype in _INTEGER_TYPES:
        if _INTEGER_RE.match(lexical):
            # int() refuses more than 4,300 digits (CPython's guard against slow conversions);
            # a Decimal holds any integer exactly and compares exactly with ints
            return int(lexical) if len(lexical) <= _INT_DIGITS_MAX else Decimal(lexical)
    elif datatype == XSD_NS + "decimal":
        if _DECIMAL_RE.match(lexical):
            return Decimal(lexical)
    elif datatype == XSD_NS + "double":
        if _DOUBLE_RE.match(lexical):
            return float(lexical.replace("INF", "inf"))
    elif datatype == XSD_NS + "float":
        if _DOUBLE_RE.match(lexical):
            return Single(lexical.replace("INF", "inf"))
    elif datatype == XSD_NS + "boolean":
        if lexical in ("true", "1"):
            return True
        if lexical in ("false", "0"):
            return False
    elif datatype == XSD_NS + "dateTime":
        value = _parse_datetime(lexical)
        if value is not None:
            return value
    elif datatype == XSD_NS + "date":
        date = _parse_date(lexical)
        if date is not None:
            return date
    elif datatype == XSD_NS + "string":
        return lexical
    elif datatype in _DURATION_TYPES:
        duration = _parse_duration(lexical)
        if duration is not None and (datatype != XSD_NS + "dayTimeDuration" or duration.months == 0) and (
                datatype != XSD_NS + "yearMonthDuration" or duration.seconds == 0):
            return duration
    return OtherLiteral(term, lexical, datatype)


@lru_cache(maxsize=VALUE_CACHE_SIZE)
def term_value(term: str) -> Any:
    """The SPARQL value of a canonical term (cached: stream values repeat)."""
    if is_literal(term):
        lexical, datatype, lang = literal_parts(term)
        if lang is not None:
            return LangString(lexical, lang)
        if datatype is None:
            return lexical
        return _typed_value(term, lexical, datatype[1:-1])
    if is_quoted(term):
        return Resource(term, "quoted")
    if is_iri(term):
        return Resource(term, "iri")
    if is_blank(term):
        return Resource(term, "bnode")
    raise EvalError(f"not a term: {term!r}")


def _escape_lexical(lexical: str) -> str:
    return lexical.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def _decimal_lexical(value: Decimal) -> str:
    text = format(value, "f")
    if "." not in text:
        text += ".0"
    return text


def value_term(value: Any) -> str:
    """The canonical term for a computed value (used by STR, DATATYPE, ... on expressions)."""
    t = type(value)
    if t is bool:
        return f'"{"true" if value else "false"}"^^<{XSD_NS}boolean>'
    if t is int:
        return f'"{value}"^^<{XSD_NS}integer>'
    if t is Decimal:
        return f'"{_decimal_lexical(value)}"^^<{XSD_NS}decimal>'
    if t is float or t is Single:
        if math.isnan(value):
            lexical = "NaN"
        elif math.isinf(value):
            lexical = "INF" if value > 0 else "-INF"
        else:
            lexical = repr(float(value)).upper().replace("E+", "E")
            if "E" not in lexical:
                lexical += "E0"
        return f'"{lexical}"^^<{XSD_NS}{"double" if t is float else "float"}>'
    if t is str:
        return f'"{_escape_lexical(value)}"'
    if t is LangString:
        return f'"{_escape_lexical(value.lexical)}"@{value.lang}'
    if t is datetime:
        return f'"{value.isoformat().replace("+00:00", "Z")}"^^<{XSD_NS}dateTime>'
    if t is Date:
        start = value.start
        zone = "" if start.tzinfo is None else start.isoformat()[19:].replace("+00:00", "Z")
        return f'"{start.date().isoformat()}{zone}"^^<{XSD_NS}date>'
    if t is Duration:
        kind = "dayTimeDuration" if value.months == 0 else "yearMonthDuration" if value.seconds == 0 else "duration"
        return f'"{_duration_lexical(value)}"^^<{XSD_NS}{kind}>'
    if t is Resource or t is OtherLiteral:
        return value.term
    raise EvalError(f"no term for {value!r}")


# --------------------------------------------------------------------------- operators


def ebv(value: Any) -> bool:
    """SPARQL effective boolean value (17.2.2)."""
    t = type(value)
    if t is bool:
        return value
    if t is int or t is Decimal:
        return value != 0
    if t is float or t is Single:
        return not (value == 0 or value != value)
    if t is str:
        return len(value) > 0
    if t is OtherLiteral and (value.datatype in _INTEGER_TYPES or value.datatype in _EBV_FALSE_WHEN_ILL_TYPED):
        return False
    raise EvalError("no effective boolean value")


_EBV_FALSE_WHEN_ILL_TYPED = {XSD_NS + "boolean", XSD_NS + "decimal", XSD_NS + "double", XSD_NS + "float"}


def _is_numeric(value: Any) -> bool:
    t = type(value)
    return t is int or t is Decimal or t is float or t is Single


_FOURTEEN_HOURS = timedelta(hours=14)


def _instant_order(a: datetime, b: datetime) -> int:
    """-1, 0 or 1 as ``a`` is before, at or after ``b`` in XSD's partial order of instants.

    An instant without a time zone stands for any of the 28 hours of zones it could be in:
    against one with a zone it is ordered only outside that span (XSD 1.1, 3.2.7.4), and the
    comparison is an error inside it.
    """
    if (a.tzinfo is None) == (b.tzinfo is None):
        return (a > b) - (a < b)
    if a.tzinfo is None:
        return -_instant_order(b, a)
    floating = b.replace(tzinfo=timezone.utc)
    if a < floating - _FOURTEEN_HOURS:
        return -1
    if a > floating + _FOURTEEN_HOURS:
        return 1
    raise EvalError("an instant with a time zone and one without, less than 14 hours apart")


def _duration_pair(a: Any, b: Any) -> tuple[Decimal | int, Decimal | int] | None:
    """Two durations, or a duration and a number of milliseconds, as comparable numbers;
    None when neither is a duration; a type error when they cannot be ordered."""
    ta, tb = type(a), type(b)
    if ta is not Duration and tb is not Duration:
        return None
    if ta is Duration and tb is Duration:
        if a.months == 0 and b.months == 0:
            return a.seconds, b.seconds
        if a.seconds == 0 and b.seconds == 0:
            return a.months, b.months
        raise EvalError("a year-month duration and a day-time duration are not ordered")
    duration, number = (a, b) if ta is Duration else (b, a)
    if not _is_numeric(number) or duration.months != 0:
        raise EvalError("a duration compared with something other than a duration or milliseconds")
    ms = duration.seconds * 1000
    number = Decimal(number) if type(number) is int else number
    return (ms, number) if ta is Duration else (number, ms)


def _equal(a: Any, b: Any) -> bool:
    """RDFterm-equal extended with value equality for the types SPARQL knows (module doc)."""
    ta, tb = type(a), type(b)
    if _is_numeric(a) and _is_numeric(b):
        return a == b
    if ta is Duration or tb is Duration:
        if ta is Resource or tb is Resource:
            return False
        pair = _duration_pair(a, b)
        return pair[0] == pair[1]  # type: ignore[index]
    if ta is tb:
        if ta is LangString:
            return a.lexical == b.lexical and a.lang.lower() == b.lang.lower()
        if ta is datetime:
            return _instant_order(a, b) == 0
        if ta is Date:
            return _instant_order(a.start, b.start) == 0
        if ta is OtherLiteral:
            if a.term == b.term:
                return True
            raise EvalError("literals of an unknown type")
        return a == b
    if ta is Resource or tb is Resource:
        return False  # an IRI is never equal to a literal
    if ta is LangString or tb is LangString:
        return False  # a language-tagged string equals no other kind of literal
    if (ta is Date and tb is datetime) or (ta is datetime and tb is Date):
        return False
    raise EvalError("literals of different types")


def _less(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if _is_numeric(a) and _is_numeric(b):
        return a < b
    pair = _duration_pair(a, b)
    if pair is not None:
        return pair[0] < pair[1]
    if ta is tb:
        if ta is str or ta is bool:
            return a < b
        if ta is datetime:
            return _instant_order(a, b) < 0
        if ta is Date:
            return _instant_order(a.start, b.start) < 0
    raise EvalError("not comparable")


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "=":
        return _equal(a, b)
    if op == "!=":
        return not _equal(a, b)
    if op == "<":
        return _less(a, b)
    if op == ">":
        return _less(b, a)
    if op == "<=":
        return _less(a, b) or _equal(a, b)
    return _less(b, a) or _equal(a, b)  # >=


def _promote(a: Any, b: Any) -> tuple[Any, Any]:
    if not (_is_numeric(a) and _is_numeric(b)):
        raise EvalError("arithmetic on non-numbers")
    ta, tb = type(a), type(b)
    if ta is tb:
        return a, b
    if ta is float or tb is float:
        return float(a), float(b)
    if ta is Single or tb is Single:
        return Single(a), Single(b)
    return Decimal(a), Decimal(b)


def _arith(op: str, a: Any, b: Any) -> Any:
    a, b = _promote(a, b)
    if type(a) is Single:  # Python's float operators return a plain float
        return Single(_arith_same(op, float(a), float(b)))
    return _arith_same(op, a, b)


def _arith_same(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    # division: integer / integer is a decimal in SPARQL
    if type(a) is int:
        a, b = Decimal(a), Decimal(b)
    if b == 0:
        if type(a) is float:
            return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
        raise EvalError("division by zero")
    return a / b


# --------------------------------------------------------------------------- casts


def _cast(datatype: str, value: Any, term: str) -> Any:
    """XPath casting for the xsd constructor functions SPARQL 1.1 lists (17.5)."""
    t = type(value)
    if datatype == XSD_NS + "string":
        if t is Resource and value.kind == "iri":
            return term[1:-1]
        if t is Resource:
            raise EvalError("cannot cast to string")
        return literal_parts(value_term(value))[0] if t is not str else value
    if t is LangString or t is Resource:
        raise EvalError("cannot cast")
    if t is OtherLiteral:
        raise EvalError("cannot cast an unknown literal")
    if datatype in (XSD_NS + "integer", XSD_NS + "decimal", XSD_NS + "double", XSD_NS + "float", XSD_NS + "boolean", XSD_NS + "dateTime"):
        if t is str:
            value = _typed_value(term, value.strip(), datatype)
            if type(value) is OtherLiteral:
                raise EvalError(f"cannot cast {term} to {datatype}")
            return value
    else:
        raise EvalError(f"unsupported cast to {datatype}")
    if datatype == XSD_NS + "dateTime":
        if t is datetime:
            return value
        if t is Date:
            return value.start  # XPath: a date becomes its first instant, in its zone if it has one
        raise EvalError("cannot cast to dateTime")
    if t is datetime or t is Date:
        raise EvalError("cannot cast a date or dateTime to a number or boolean")
    if datatype == XSD_NS + "boolean":
        return value if t is bool else (value != 0 and value == value)
    floating = t is float or t is Single
    if datatype == XSD_NS + "integer":
        if floating and (math.isnan(value) or math.isinf(value)):
            raise EvalError("cannot cast to integer")
        return int(value)
    if datatype == XSD_NS + "decimal":
        if floating and (math.isnan(value) or math.isinf(value)):
            raise EvalError("cannot cast to decimal")
        return Decimal(int(value)) if t is bool else Decimal(repr(float(value)) if floating else value)
    return Single(value) if datatype == XSD_NS + "float" else float(value)


CAST_DATATYPES = frozenset(XSD_NS + t for t in ("integer", "decimal", "double", "float", "boolean", "dateTime", "string"))


# --------------------------------------------------------------------------- compilation

_REGEX_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE}


def _compile_regex(pattern: str, flags: str) -> re.Pattern:
    options = 0
    for flag in flags:
        if flag == "q":
            continue
        if flag not in _REGEX_FLAGS:
            raise ValueError(f"unknown regex flag {flag!r}")
        options |= _REGEX_FLAGS[flag]
    if "q" in flags:
        pattern = re.escape(pattern)
    return re.compile(pattern, options)


@lru_cache(maxsize=1024)
def _cached_regex(pattern: str, flags: str) -> re.Pattern:
    try:
        return _compile_regex(pattern, flags)
    except (re.error, ValueError) as exc:
        raise EvalError(str(exc)) from None


def _string_of(value: Any) -> str:
    """The lexical form of a string literal argument (simple, xsd:string or language-tagged)."""
    t = type(value)
    if t is str:
        return value
    if t is LangString:
        return value.lexical
    raise EvalError("not a string literal")


_ARITY = {
    "BOUND": (1, 1), "REGEX": (2, 3), "STR": (1, 1), "LANG": (1, 1), "DATATYPE": (1, 1),
    "ISIRI": (1, 1), "ISURI": (1, 1), "ISLITERAL": (1, 1), "ISBLANK": (1, 1), "ISNUMERIC": (1, 1),
    "SAMETERM": (2, 2), "LANGMATCHES": (2, 2), "CONTAINS": (2, 2), "STRSTARTS": (2, 2),
    "STRENDS": (2, 2), "STRLEN": (1, 1), "UCASE": (1, 1), "LCASE": (1, 1), "ABS": (1, 1),
    "ISTRIPLE": (1, 1), "IF": (3, 3), "COALESCE": (1, 64), "CONCAT": (0, 64), "ROUND": (1, 1),
    "CEIL": (1, 1), "FLOOR": (1, 1),
    # EP-SPARQL: the interval of the group the FILTER is in (docs/engine.md, "Temporal operators")
    "GETDURATION": (0, 0), "GETSTARTTIME": (0, 0), "GETENDTIME": (0, 0),
}
BUILTINS = frozenset(_ARITY)
INTERVAL_FUNCTIONS = frozenset(("GETDURATION", "GETSTARTTIME", "GETENDTIME"))
# The row slots an interval function reads: the engine appends the group's interval
# (milliseconds of stream time) to the row under these names before it evaluates the filter.
INTERVAL_START = "_:interval-start"
INTERVAL_END = "_:interval-end"


def uses_interval(expr: Expr) -> bool:
    """True when the expression calls getDURATION(), getSTARTTIME() or getENDTIME()."""
    if isinstance(expr, tuple) and expr:
        if expr[0] == "call" and expr[1] in INTERVAL_FUNCTIONS:
            return True
        return any(uses_interval(child) for child in expr[1:])
    if isinstance(expr, list):
        return any(uses_interval(child) for child in expr)
    return False


def check(expr: Expr) -> None:
    """Raise FilterCompileError for what can never evaluate: wrong arity, bad constant regex."""
    kind = expr[0]
    if kind == "call":
        name, args = expr[1], expr[2]
        if name not in _ARITY:
            raise FilterCompileError(f"unknown function {name}")
        low, high = _ARITY[name]
        if not low <= len(args) <= high:
            count = low if low == high else f"{low} to {high}"
            raise FilterCompileError(f"{name} takes {count} argument(s), got {len(args)}")
        if name == "BOUND" and args[0][0] != "var":
            raise FilterCompileError("BOUND takes a variable")
        if name == "REGEX" and args[1][0] == "const" and (len(args) == 2 or args[2][0] == "const"):
            try:
                pattern = term_value(args[1][1])
                flags = term_value(args[2][1]) if len(args) == 3 else ""
                if type(pattern) is str and type(flags) is str:
                    _compile_regex(pattern, flags)
            except (re.error, ValueError) as exc:
                raise FilterCompileError(f"invalid regular expression: {exc}") from None
        for arg in args:
            check(arg)
    elif kind == "cast":
        if expr[1] not in CAST_DATATYPES:
            raise FilterCompileError(f"unknown function <{expr[1]}>")
        check(expr[2])
    elif kind == "in":
        check(expr[1])
        for item in expr[2]:
            check(item)
    elif kind not in ("var", "const"):
        for child in expr[1:]:
            if isinstance(child, tuple):
                check(child)


def rename_variables(expr: Expr, rename: Callable[[str], str]) -> Expr:
    """The expression with every variable name passed through ``rename``."""
    if isinstance(expr, tuple) and expr:
        if expr[0] == "var":
            return ("var", rename(expr[1]))
        return (expr[0],) + tuple(rename_variables(child, rename) for child in expr[1:])
    if isinstance(expr, list):
        return [rename_variables(child, rename) for child in expr]
    return expr


def variables_of(expr: Expr) -> frozenset[str]:
    """Names (without '?') of the variables an expression mentions."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, tuple) and node:
            if node[0] == "var":
                found.add(node[1])
                return
            for child in node[1:]:
                visit(child)
        elif isinstance(node, list):
            for child in node:
                visit(child)

    visit(expr)
    return frozenset(found)


class _Compiler:
    """Builds the closures for one (expression, slots) pair."""

    def __init__(self, slots: dict[str, int]):
        self.slots = slots

    # Terms: variables and constants are returned as they are; computed values converted.
    def term(self, expr: Expr) -> Closure:
        kind = expr[0]
        if kind == "var":
            index = self.slots.get(expr[1])
            if index is None:
                return _unbound
            def var_term(row: Row, i: int = index) -> str:
                t = row[i]
                if t is None:
                    raise EvalError("unbound")
                return t
            return var_term
        if kind == "const":
            term = expr[1]
            return lambda row: term
        value = self.value(expr)
        return lambda row: value_term(value(row))

    def value(self, expr: Expr) -> Closure:
        return getattr(self, "_" + expr[0])(expr)

    def _var(self, expr: Expr) -> Closure:
        index = self.slots.get(expr[1])
        if index is None:
            return _unbound
        tv = term_value

        def var_value(row: Row, i: int = index) -> Any:
            t = row[i]
            if t is None:
                raise EvalError("unbound")
            return tv(t)
        return var_value

    def _const(self, expr: Expr) -> Closure:
        value = term_value(expr[1])
        return lambda row: value

    def _or(self, expr: Expr) -> Closure:
        left, right = self.value(expr[1]), self.value(expr[2])

        def or_(row: Row) -> bool:
            try:
                if ebv(left(row)):
                    return True
            except EvalError:
                if ebv(right(row)):
                    return True
                raise
            return ebv(right(row))
        return or_

    def _and(self, expr: Expr) -> Closure:
        left, right = self.value(expr[1]), self.value(expr[2])

        def and_(row: Row) -> bool:
            try:
                if not ebv(left(row)):
                    return False
            except EvalError:
                if not ebv(right(row)):
                    return False
                raise
            return ebv(right(row))
        return and_

    def _not(self, expr: Expr) -> Closure:
        inner = self.value(expr[1])
        return lambda row: not ebv(inner(row))

    def _cmp(self, expr: Expr) -> Closure:
        op, left, right = expr[1], self.value(expr[2]), self.value(expr[3])
        if expr[3][0] == "const" and op in ("<", ">", "<=", ">="):
            constant = term_value(expr[3][1])
            if _is_numeric(constant):  # the common `?value > 20`: a direct comparison
                fast = {"<": lambda a: a < constant, ">": lambda a: a > constant,
                        "<=": lambda a: a <= constant, ">=": lambda a: a >= constant}[op]

                def numeric_cmp(row: Row) -> bool:
                    a = left(row)
                    t = type(a)
                    if t is int or t is float or t is Decimal or t is Single:
                        return fast(a)
                    return _compare(op, a, constant)
                return numeric_cmp
        return lambda row: _compare(op, left(row), right(row))

    def _arith(self, expr: Expr) -> Closure:
        op, left, right = expr[1], self.value(expr[2]), self.value(expr[3])
        return lambda row: _arith(op, left(row), right(row))

    def _neg(self, expr: Expr) -> Closure:
        inner = self.value(expr[1])

        def neg(row: Row) -> Any:
            v = inner(row)
            if not _is_numeric(v):
                raise EvalError("negation of a non-number")
            return Single(-v) if type(v) is Single else -v
        return neg

    def _pos(self, expr: Expr) -> Closure:
        inner = self.value(expr[1])

        def pos(row: Row) -> Any:
            v = inner(row)
            if not _is_numeric(v):
                raise EvalError("unary plus on a non-number")
            return v
        return pos

    def _in(self, expr: Expr) -> Closure:
        needle = self.value(expr[1])
        items = [self.value(item) for item in expr[2]]
        negated = expr[3]

        def in_(row: Row) -> bool:
            v = needle(row)
            error = False
            for item in items:
                try:
                    if _equal(v, item(row)):
                        return not negated
                except EvalError:
                    error = True
            if error:
                raise EvalError("IN with an error")
            return negated
        return in_

    def _interval(self, name: str) -> Closure:
        start_at, end_at = self.slots.get(INTERVAL_START), self.slots.get(INTERVAL_END)
        if start_at is None or end_at is None:
            return _no_interval

        def interval(row: Row) -> Any:
            start, end = row[start_at], row[end_at]
            if start is None or end is None or start < 0:
                raise EvalError("a group of static triples has no interval")
            if name == "GETDURATION":
                return duration_ms(end - start)
            return datetime.fromtimestamp((start if name == "GETSTARTTIME" else end) / 1000, timezone.utc)
        return interval

    def _cast(self, expr: Expr) -> Closure:
        datatype, value, term = expr[1], self.value(expr[2]), self.term(expr[2])
        return lambda row: _cast(datatype, value(row), term(row))

    def _call(self, expr: Expr) -> Closure:
        name, args = expr[1], expr[2]
        if name == "BOUND":
            index = self.slots.get(args[0][1])
            if index is None:
                return lambda row: False
            return lambda row: row[index] is not None
        if name == "REGEX":
            return self._regex(args)
        if name in INTERVAL_FUNCTIONS:
            return self._interval(name)
        if name in ("STR", "LANG", "DATATYPE", "ISIRI", "ISURI", "ISLITERAL", "ISBLANK", "ISTRIPLE"):
            term = self.term(args[0])
            return {
                "STR": lambda row: _str(term(row)),
                "LANG": lambda row: _lang(term(row)),
                "DATATYPE": lambda row: _datatype(term(row)),
                "ISIRI": lambda row: is_iri(term(row)),
                "ISURI": lambda row: is_iri(term(row)),
                "ISLITERAL": lambda row: is_literal(term(row)),
                "ISBLANK": lambda row: is_blank(term(row)),
                "ISTRIPLE": lambda row: is_quoted(term(row)),
            }[name]
        if name == "SAMETERM":
            a, b = self.term(args[0]), self.term(args[1])
            return lambda row: a(row) == b(row)
        if name == "IF":
            test, then, otherwise = (self.value(arg) for arg in args)
            return lambda row: then(row) if ebv(test(row)) else otherwise(row)
        if name == "COALESCE":
            return self._coalesce([self.value(arg) for arg in args])
        values = [self.value(arg) for arg in args]
        if name == "CONCAT":
            return self._concat(values)
        if name in ("ROUND", "CEIL", "FLOOR"):
            return self._rounding(name, values[0])
        if name == "ISNUMERIC":
            a = values[0]
            return lambda row: _is_numeric(a(row))
        if name == "ABS":
            a = values[0]

            def abs_(row: Row) -> Any:
                v = a(row)
                if not _is_numeric(v):
                    raise EvalError("ABS of a non-number")
                return Single(abs(v)) if type(v) is Single else abs(v)
            return abs_
        if name == "STRLEN":
            a = values[0]
            return lambda row: len(_string_of(a(row)))
        if name in ("UCASE", "LCASE"):
            a = values[0]
            upper = name == "UCASE"

            def case(row: Row) -> Any:
                v = a(row)
                if type(v) is LangString:
                    return LangString(v.lexical.upper() if upper else v.lexical.lower(), v.lang)
                s = _string_of(v)
                return s.upper() if upper else s.lower()
            return case
        if name == "LANGMATCHES":
            a, b = values

            def langmatches(row: Row) -> bool:
                tag, tag_range = a(row), b(row)
                if type(tag) is not str or type(tag_range) is not str:
                    raise EvalError("LANGMATCHES takes simple literals")
                if tag_range == "*":
                    return tag != ""
                tag, tag_range = tag.lower(), tag_range.lower()
                return tag == tag_range or tag.startswith(tag_range + "-")
            return langmatches
        a, b = values  # CONTAINS, STRSTARTS, STRENDS
        method = {"CONTAINS": str.__contains__, "STRSTARTS": str.startswith, "STRENDS": str.endswith}[name]

        def string_test(row: Row) -> bool:
            x, y = a(row), b(row)
            if type(y) is LangString and (type(x) is not LangString or x.lang.lower() != y.lang.lower()):
                raise EvalError("incompatible string arguments")
            return method(_string_of(x), _string_of(y))
        return string_test

    @staticmethod
    def _coalesce(values: list[Closure]) -> Closure:
        def coalesce(row: Row) -> Any:
            for value in values:
                try:
                    return value(row)
                except _EVAL_FAILURES:
                    continue
            raise EvalError("COALESCE: every argument is an error")
        return coalesce

    @staticmethod
    def _concat(values: list[Closure]) -> Closure:
        def concat(row: Row) -> Any:
            parts = [value(row) for value in values]
            text = "".join(_string_of(part) for part in parts)
            langs = {part.lang if type(part) is LangString else None for part in parts}
            if len(langs) == 1 and None not in langs:  # all of one language: the result keeps it
                return LangString(text, langs.pop())
            return text
        return concat

    @staticmethod
    def _rounding(name: str, inner: Closure) -> Closure:
        def rounding(row: Row) -> Any:
            v = inner(row)
            if not _is_numeric(v):
                raise EvalError(f"{name} of a non-number")
            if type(v) is int:
                return v
            if name == "ROUND":  # XPath fn:round: halves towards positive infinity
                r = math.floor(v + Decimal("0.5") if type(v) is Decimal else v + 0.5)
            else:
                r = math.ceil(v) if name == "CEIL" else math.floor(v)
            if type(v) is Decimal:
                return Decimal(r)
            return Single(r) if type(v) is Single else float(r)
        return rounding

    def _regex(self, args: list) -> Closure:
        text = self.value(args[0])
        constant_pattern = args[1][0] == "const" and (len(args) == 2 or args[2][0] == "const")
        if constant_pattern:
            pattern = term_value(args[1][1])
            flags = term_value(args[2][1]) if len(args) == 3 else ""
            if type(pattern) is not str or type(flags) is not str:
                return _always_error
            compiled = _cached_regex(pattern, flags)
            search = compiled.search
            return lambda row: search(_string_of(text(row))) is not None
        pattern_of = self.value(args[1])
        flags_of = self.value(args[2]) if len(args) == 3 else (lambda row: "")

        def regex(row: Row) -> bool:
            pattern, flags = pattern_of(row), flags_of(row)
            if type(pattern) is not str or type(flags) is not str:
                raise EvalError("REGEX pattern and flags must be simple literals")
            return _cached_regex(pattern, flags).search(_string_of(text(row))) is not None
        return regex


def _unbound(row: Row) -> Any:
    raise EvalError("unbound variable")


def _no_interval(row: Row) -> Any:
    raise EvalError("no interval here")


def _always_error(row: Row) -> Any:
    raise EvalError("type error")


def _str(term: str) -> str:
    if is_literal(term):
        return literal_parts(term)[0]
    if is_iri(term):
        return term[1:-1]
    raise EvalError("STR of a blank node or quoted triple")


def _lang(term: str) -> str:
    if not is_literal(term):
        raise EvalError("LANG of a non-literal")
    return literal_parts(term)[2] or ""


def _datatype(term: str) -> Resource:
    if not is_literal(term):
        raise EvalError("DATATYPE of a non-literal")
    _, datatype, lang = literal_parts(term)
    if lang is not None:
        return Resource(RDF_LANGSTRING, "iri")
    return Resource(datatype or XSD_STRING, "iri")


EVAL_FAILURES = _EVAL_FAILURES = (EvalError, TypeError, ValueError, ArithmeticError, InvalidOperation, OverflowError)


def compile_term(expr: Expr, slots: dict[str, int]) -> Callable[[Row], Term | None]:
    """The expression's value on a row as a canonical term, or None where SPARQL has an
    error (BIND and a SELECT expression then leave their variable unbound)."""
    check(expr)
    compiler = _Compiler(slots)
    term = compiler.term(expr)

    def evaluate(row: Row) -> Term | None:
        try:
            return term(row)
        except _EVAL_FAILURES:
            return None
    return evaluate


def compile_value(expr: Expr, slots: dict[str, int]) -> Closure:
    """The expression's Python value on a row; raises EvalError (and the other evaluation
    failures in EVAL_FAILURES) where SPARQL has an error. For aggregates and ORDER BY."""
    check(expr)
    return _Compiler(slots).value(expr)


def compile_filter(expr: Expr, text: str) -> Filter:
    """A Filter for an expression tree; raises FilterCompileError when it can never evaluate."""
    check(expr)

    def bind(slots: dict[str, int]) -> Callable[[Row], bool]:
        evaluate = _Compiler(slots).value(expr)

        def predicate(row: Row) -> bool:
            try:
                return ebv(evaluate(row))
            except _EVAL_FAILURES:
                return False
        return predicate

    return Filter(text=text, variables=variables_of(expr), bind=bind, interval=uses_interval(expr))
