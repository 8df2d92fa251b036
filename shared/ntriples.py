"""N-Triples and N-Triples-star: the codec every edgewave component speaks on the wire.

Terms are plain ``str`` in canonical N-Triples form, so that two spellings of a term are
equal strings and the engine can hash, compare and hold millions of them in tuples. They
are not interned: a stream's terms are mostly one-off (each observation's own IRI and
value), and interning them grew the interpreter's table of interned strings, which never
shrinks, by a step of several MB on an endless stream (README, "Measured"); repeated
tokens share one string anyway through the fast path's caches below:

- IRI ``<http://example.org/a>``: ``\\uXXXX``/``\\UXXXXXXXX`` escapes are decoded, except
  for characters an IRI may not contain (space, ``<>"{}|^`\\`` and controls), which stay
  escaped as ``\\u00XX`` (upper-case hex) so that the term still parses;
- blank node ``_:b0``, label as written;
- literal ``"lexical"``, ``"chat"@en``, ``"25.3"^^<http://www.w3.org/2001/XMLSchema#decimal>``:
  the lexical form is escaped canonically (only ``\\\\``, ``\\"``, ``\\n``, ``\\r``; every other
  escape decoded), language tags lower-cased, datatypes kept as written except
  ``xsd:string``, which is left out: in RDF 1.1 ``"x"^^xsd:string`` and ``"x"`` are one term
  (and canonical N-Triples writes it without the datatype), so they must be one string;
- quoted triple (RDF-star) ``<< s p o >>`` with single spaces, nested to any depth.

A triple is a ``tuple[str, str, str]``. Two spellings of one statement parse to the same
tuple, and ``serialize`` of any parsed triple parses back to that same tuple.

Parsing has two paths. Almost every line on the wire is already canonical: three terms
separated by single spaces and `` .`` at the end, with no escapes. The *fast path* splits
such a line with ``str.split`` and looks each raw token up in a per-position cache of
validated, canonical terms; a token not seen before goes once through the full
parser's term rules and is cached. Whenever the fast path has any doubt (tabs, double
spaces, a comment, quoted triples, escapes that change the token, an invalid token) it
returns None and the *full parser*, a careful regex-and-position parser of the whole
grammar, decides the line and writes the error message. The fast path never accepts a
line the full parser rejects, and never returns a different triple (property-tested).

Deviations from the letter of the grammar, chosen for interoperability: an escaped UTF-16
surrogate pair (``\\uD83D\\uDE00``, as some Java tools write) is combined into one
character, a lone escaped surrogate is an error; whitespace inside a literal term (between
the string and ``@lang`` or ``^^``) is not accepted; ``parse`` skips a leading byte-order
mark.

The API, what other modules may rely on: ``parse_line(line, line_no=0) -> Triple | None``
(None for blank and comment lines), ``parse_lines(lines, errors=None)``, ``parse(text,
errors=None)``, ``serialize(triple) -> str`` (``"s p o ."``), ``NTriplesError(line, column,
reason)``; ``quoted_parts(term) -> Triple``; ``literal_parts(term) -> (lexical, datatype |
None, lang | None)``, the one way to split a literal (the FILTER evaluator uses it too):
cached, ``ValueError`` for a term that is not a literal, and the datatype an IRI *term*
(``<http://...#decimal>``) like every other term; ``make_iri``, ``make_literal(value,
datatype=None, lang=None)``, ``make_blank``, ``make_quoted``; ``is_iri``, ``is_literal``,
``is_blank``, ``is_quoted``. Split a payload into lines with ``text.split("\\n")`` (or call
``parse``), never ``str.splitlines()``: a canonical literal may hold a raw U+2028, U+0085 or
form feed, which ``splitlines`` treats as line ends.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Iterable, Iterator

__all__ = [
    "NTriplesError",
    "clear_term_caches",
    "Triple",
    "is_blank",
    "is_iri",
    "is_literal",
    "is_quoted",
    "literal_parts",
    "make_blank",
    "make_iri",
    "make_literal",
    "make_quoted",
    "parse",
    "parse_line",
    "parse_lines",
    "quoted_parts",
    "serialize",
    "serialize_term",
]

Triple = tuple[str, str, str]


# Quoted triples nest; past this depth a line is rejected rather than risking recursion.
MAX_QUOTED_DEPTH = 64


class NTriplesError(ValueError):
    """A malformed N-Triples line: where (1-based line and column) and why."""

    def __init__(self, line: int, column: int, reason: str) -> None:
        super().__init__(f"line {line}, column {column}: {reason}")
        self.line = line
        self.column = column
        self.reason = reason

    def __reduce__(self):  # keep line/column/reason when pickled (multiprocessing, logging)
        return (self.__class__, (self.line, self.column, self.reason))


# --------------------------------------------------------------------------------------
# Lexical rules (N-Triples 1.1, section 7 of the recommendation, plus RDF-star's '<<' '>>')
# --------------------------------------------------------------------------------------

_IRI_CHAR = r'[^\x00-\x20<>"{}|^`\\]'
_UCHAR = r"\\(?:u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8})"
# '<' IRI '>' as an unrolled loop: runs of plain characters between escapes.
_IRI_RE = re.compile(rf"<({_IRI_CHAR}*(?:{_UCHAR}{_IRI_CHAR}*)*)>")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_IRI_FORBIDDEN_RE = re.compile(r'[\x00-\x20<>"{}|^`\\]')

_STRING_RE = re.compile(
    r'"([^"\\\n\r]*(?:\\(?:[tbnrf"\'\\]|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8})[^"\\\n\r]*)*)"'
)
_XSD_STRING = "<http://www.w3.org/2001/XMLSchema#string>"  # left out of literal terms, see above
_LANG_RE = re.compile(r"@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)")
_LANG_TAIL = frozenset("-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

_PN_CHARS_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff"
    "\u200c-\u200d\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf"
    "\ufdf0-\ufffd\U00010000-\U000effff"
)
_PN_CHARS_U = _PN_CHARS_BASE + "_:"
_PN_CHARS = _PN_CHARS_U + "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040"


@lru_cache(maxsize=1)
def _bnode_re() -> re.Pattern[str]:
    """Compiled on first use: its Unicode ranges take 10 ms, and most streams have no blank node."""
    return re.compile(f"_:[{_PN_CHARS_U}0-9](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?")


_WS_RE = re.compile(r"[ \t]*")
_ESCAPE_RE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_ECHARS = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _decode(raw: str, column: int, line_no: int) -> str:
    """Decode the escapes of a matched IRI or string body that starts at ``column``."""

    def replace(m: re.Match) -> str:
        hex_digits = m.group(1) or m.group(2)
        if hex_digits is None:
            return _ECHARS[m.group(3)]
        code = int(hex_digits, 16)
        if code > 0x10FFFF:
            raise NTriplesError(
                line_no, column + m.start(), f"escape {m.group()} is beyond U+10FFFF, not a character"
            )
        return chr(code)

    text = _ESCAPE_RE.sub(replace, raw)
    if _SURROGATE_RE.search(text):
        try:  # combine escaped UTF-16 pairs ("\uD83D\uDE00") into one character
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            raise NTriplesError(
                line_no,
                column + _lone_surrogate_offset(raw),
                "escape is a lone UTF-16 surrogate, not a character",
            ) from None
    return text


def _lone_surrogate_offset(raw: str) -> int:
    """Offset in ``raw`` of the first escape that is an unpaired surrogate."""
    pending = None  # (start, end) of a high surrogate waiting for its low half
    for m in _ESCAPE_RE.finditer(raw):
        hex_digits = m.group(1) or m.group(2)
        code = int(hex_digits, 16) if hex_digits else 0
        if 0xD800 <= code <= 0xDBFF:
            if pending is not None:
                return pending[0]
            pending = (m.start(), m.end())
        elif 0xDC00 <= code <= 0xDFFF:
            if pending is None or pending[1] != m.start():
                return pending[0] if pending is not None else m.start()
            pending = None
        elif pending is not None:
            return pending[0]
    return pending[0] if pending is not None else 0


def _escape_lexical(text: str) -> str:
    """The canonical escaping of a literal's lexical form."""
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if '"' in text:
        text = text.replace('"', '\\"')
    if "\n" in text:
        text = text.replace("\n", "\\n")
    if "\r" in text:
        text = text.replace("\r", "\\r")
    return text


def _escape_iri(iri: str) -> str:
    """Keep characters an IRI may not contain escaped, so the term still parses."""
    return _IRI_FORBIDDEN_RE.sub(lambda m: f"\\u{ord(m.group()):04X}", iri)


# --------------------------------------------------------------------------------------
# Full parser: every rule of the grammar, with the position and reason of any error.
# Each rule takes (line, pos, line_no) and returns (canonical term, end pos).
# --------------------------------------------------------------------------------------


def _iri(line: str, pos: int, line_no: int) -> tuple[str, int]:
    m = _IRI_RE.match(line, pos)
    if m is None:
        raise _iri_error(line, pos, line_no)
    body = m.group(1)
    if "\\" in body:
        body = _decode(body, pos + 2, line_no)
        if not _SCHEME_RE.match(body):
            raise _relative_iri(line_no, pos, body)
        body = _escape_iri(body)
    elif not _SCHEME_RE.match(body):
        raise _relative_iri(line_no, pos, body)
    return f"<{body}>", m.end()


def _relative_iri(line_no: int, pos: int, body: str) -> NTriplesError:
    return NTriplesError(
        line_no, pos + 1, f"relative IRI <{body}>: N-Triples needs an absolute IRI (with a scheme such as http:)"
    )


def _iri_error(line: str, pos: int, line_no: int) -> NTriplesError:
    """Find why an IRI starting at ``pos`` does not match."""
    i, n = pos + 1, len(line)
    while i < n:
        c = line[i]
        if c == ">":
            return NTriplesError(line_no, pos + 1, "malformed IRI")
        if c == "\\":
            bad = _bad_uchar(line, i)
            if bad:
                return NTriplesError(line_no, i + 1, f"{bad} in IRI (only \\uXXXX and \\UXXXXXXXX are allowed)")
            i += 6 if line[i + 1] == "u" else 10
            continue
        if c in " \t":
            return NTriplesError(line_no, i + 1, f"expected '>' to close IRI, found {_describe(c)}")
        if c <= " " or c in '<"{}|^`':
            return NTriplesError(line_no, i + 1, f"{_describe(c)} is not allowed in an IRI")
        i += 1
    return NTriplesError(line_no, n + 1, "expected '>' to close IRI")


def _bad_uchar(line: str, i: int) -> str | None:
    """Describe a bad \\u/\\U escape at ``line[i]`` (a backslash), or None if it is fine."""
    kind = line[i + 1 : i + 2]
    width = {"u": 4, "U": 8}.get(kind)
    if width is None:
        return f"bad escape '\\{kind}'" if kind else "backslash at end of line"
    digits = line[i + 2 : i + 2 + width]
    if len(digits) == width and all(d in "0123456789abcdefABCDEF" for d in digits):
        return None
    shown = re.split(r'[\s"\'<>\\]', digits, maxsplit=1)[0]
    return f"bad escape '\\{kind}{shown}': expected {width} hex digits after \\{kind}"


def _describe(c: str) -> str:
    if c == " ":
        return "space"
    if c == "\t":
        return "tab"
    if c.isprintable():
        return f"{c!r}"
    return f"character U+{ord(c):04X}"


def _literal(line: str, pos: int, line_no: int) -> tuple[str, int]:
    m = _STRING_RE.match(line, pos)
    if m is None:
        raise _string_error(line, pos, line_no)
    body = m.group(1)
    if "\\" in body:
        body = _escape_lexical(_decode(body, pos + 2, line_no))
    end = m.end()
    after = line[end : end + 1]
    if after == "@":
        lang = _LANG_RE.match(line, end)
        if lang is None or line[lang.end() : lang.end() + 1] in _LANG_TAIL:
            raise NTriplesError(
                line_no, end + 1, "bad language tag: expected letters, then '-' and letters or digits (like @en-GB)"
            )
        end = lang.end()
        if line[end : end + 1] == "^":
            raise NTriplesError(line_no, end + 1, "a literal has a language tag or a datatype, not both")
        return f'"{body}"@{lang.group(1).lower()}', end
    if after == "^":
        if line[end + 1 : end + 2] != "^":
            raise NTriplesError(line_no, end + 2, "expected '^^' before a datatype IRI")
        if line[end + 2 : end + 3] != "<":
            raise NTriplesError(line_no, end + 3, "expected a datatype IRI <...> after '^^'")
        datatype, end = _iri(line, end + 2, line_no)
        if line[end : end + 1] == "@":
            raise NTriplesError(line_no, end + 1, "a literal has a language tag or a datatype, not both")
        if datatype == _XSD_STRING:
            return f'"{body}"', end
        return f'"{body}"^^{datatype}', end
    return f'"{body}"', end


def _string_error(line: str, pos: int, line_no: int) -> NTriplesError:
    """Find why a string starting at ``pos`` does not match."""
    i, n = pos + 1, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            return NTriplesError(line_no, pos + 1, "malformed literal")
        if c == "\\":
            kind = line[i + 1 : i + 2]
            if kind in _ECHARS:
                i += 2
                continue
            bad = _bad_uchar(line, i)
            if bad:
                return NTriplesError(
                    line_no,
                    i + 1,
                    f"{bad} in literal (allowed: \\t \\b \\n \\r \\f \\\" \\' \\\\ \\uXXXX \\UXXXXXXXX)",
                )
            i += 6 if kind == "u" else 10
            continue
        if c in "\r\n":
            return NTriplesError(line_no, i + 1, "line break inside a literal: write it as \\n or \\r")
        i += 1
    return NTriplesError(line_no, n + 1, "expected '\"' to close literal")


def _blank(line: str, pos: int, line_no: int) -> tuple[str, int]:
    m = _bnode_re().match(line, pos)
    if m is None:
        raise NTriplesError(
            line_no, pos + 1, "bad blank node: expected '_:' and a label starting with a letter, digit or '_'"
        )
    return m.group(), m.end()


def _quoted(line: str, pos: int, line_no: int, depth: int) -> tuple[str, int]:
    """'<<' subject predicate object '>>' starting at ``pos``."""
    if depth >= MAX_QUOTED_DEPTH:
        raise NTriplesError(line_no, pos + 1, f"quoted triples nested deeper than {MAX_QUOTED_DEPTH}")
    (s, p, o), end = _quoted_triple(line, pos, line_no, depth)
    return f"<< {s} {p} {o} >>", end


def _quoted_triple(line: str, pos: int, line_no: int, depth: int) -> tuple[Triple, int]:
    ws = _WS_RE.match
    s, pos = _subject(line, ws(line, pos + 2).end(), line_no, depth + 1)
    p, pos = _predicate(line, ws(line, pos).end(), line_no)
    o, pos = _object(line, ws(line, pos).end(), line_no, depth + 1)
    pos = ws(line, pos).end()
    if not line.startswith(">>", pos):
        raise NTriplesError(line_no, pos + 1, f"expected '>>' to close quoted triple, found {_found(line, pos)}")
    return (s, p, o), pos + 2


def _found(line: str, pos: int) -> str:
    return _describe(line[pos]) if pos < len(line) else "end of line"


def _subject(line: str, pos: int, line_no: int, depth: int = 0) -> tuple[str, int]:
    c = line[pos : pos + 1]
    if c == "<":
        if line.startswith("<<", pos):
            return _quoted(line, pos, line_no, depth)
        return _iri(line, pos, line_no)
    if c == "_":
        return _blank(line, pos, line_no)
    if c == '"':
        raise NTriplesError(line_no, pos + 1, "a literal cannot be a subject")
    hint = "; @prefix and @base are Turtle, not N-Triples" if c == "@" else ""
    raise NTriplesError(
        line_no, pos + 1, f"expected subject (IRI, blank node or << quoted triple >>), found {_found(line, pos)}{hint}"
    )


def _predicate(line: str, pos: int, line_no: int) -> tuple[str, int]:
    c = line[pos : pos + 1]
    if c == "<" and not line.startswith("<<", pos):
        return _iri(line, pos, line_no)
    if c == "_":
        reason = "a blank node cannot be a predicate"
    elif c == '"':
        reason = "a literal cannot be a predicate"
    elif c == "<":
        reason = "a quoted triple cannot be a predicate"
    elif c == "a":
        reason = "expected predicate IRI, found 'a' (the Turtle shorthand for rdf:type is not N-Triples)"
    else:
        reason = f"expected predicate IRI, found {_found(line, pos)}"
    raise NTriplesError(line_no, pos + 1, reason)


def _object(line: str, pos: int, line_no: int, depth: int = 0) -> tuple[str, int]:
    c = line[pos : pos + 1]
    if c == "<":
        if line.startswith("<<", pos):
            return _quoted(line, pos, line_no, depth)
        return _iri(line, pos, line_no)
    if c == '"':
        return _literal(line, pos, line_no)
    if c == "_":
        return _blank(line, pos, line_no)
    hint = ""
    if c and (c in "+-'" or c.isdigit()) or c in ("t", "f"):
        hint = " (numbers, booleans and single-quoted strings are Turtle; N-Triples writes \"...\"^^<datatype>)"
    raise NTriplesError(
        line_no,
        pos + 1,
        f"expected object (IRI, blank node, literal or << quoted triple >>), found {_found(line, pos)}{hint}",
    )


def _strip_eol(line: str) -> str:
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    return line


def _parse_full(line: str, line_no: int = 0) -> Triple | None:
    """The full parser: one statement, a blank line or a comment line."""
    line = _strip_eol(line)
    ws = _WS_RE.match
    pos = ws(line).end()
    if pos == len(line) or line[pos] == "#":
        return None
    s, pos = _subject(line, pos, line_no)
    p, pos = _predicate(line, ws(line, pos).end(), line_no)
    o, pos = _object(line, ws(line, pos).end(), line_no)
    pos = ws(line, pos).end()
    if line[pos : pos + 1] != ".":
        raise NTriplesError(line_no, pos + 1, f"expected '.' to end the statement, found {_found(line, pos)}")
    pos = ws(line, pos + 1).end()
    if pos < len(line) and line[pos] != "#":
        raise NTriplesError(
            line_no, pos + 1, f"unexpected {_describe(line[pos])} after '.' (one statement per line)"
        )
    return (s, p, o)


# --------------------------------------------------------------------------------------
# Fast path: canonical lines, raw tokens looked up in caches of validated terms.
# --------------------------------------------------------------------------------------

# raw token -> canonical term, one cache per position because the rules differ
# (a literal may only be an object, a blank node not a predicate). Quoted triples never
# enter: the token rules below have no quoted-triple case, and '<<' fails the IRI rule.
_subjects: dict[str, str] = {}
_predicates: dict[str, str] = {}
_objects: dict[str, str] = {}
# A cache is emptied when it reaches this size; tokens that repeat come back at once.
DEFAULT_CACHE_LIMIT = 1 << 16
CACHE_LIMIT = DEFAULT_CACHE_LIMIT
# Longer tokens are not cached: a vocabulary's terms are short, and caching one-off long
# ones (a 16 kB literal per message) would let the caches hold CACHE_LIMIT times that.
CACHE_TOKEN_MAX = 256
# Entries kept by each least-recently-used cache of term parts (``quoted_parts``,
# ``literal_parts``; the engine's ``term_value`` uses it too). What repeats (a schema's
# constants, a filter's threshold, common readings) stays cached; what does not (an exact
# reading, an observation's quoted triple) is evicted. A larger cache only holds more
# one-off terms: at 65,536 entries each, a gateway agent at the demo's pace added 1,400-2,000
# entries an hour to each (about 2 MB an hour in all), for a day and a half until full; at
# 1,024 it still grew for 40 minutes. At 256 they are full within ten.
VALUE_CACHE_SIZE = 256


def clear_term_caches() -> None:
    """Forget every cached token (benchmarks use it to time a cold start)."""
    _subjects.clear()
    _predicates.clear()
    _objects.clear()


def set_term_cache_limit(limit: int) -> None:
    """Bound each token cache at ``limit`` entries (it is emptied when full).

    The default suits a recorded stream whose vocabulary repeats across many lines. A
    gateway reads mostly one-off terms (each observation's own IRI and value), so there
    a large cache holds memory and saves little: see ``edgewave.agent.cli``.
    """
    global CACHE_LIMIT
    if limit < 1:
        raise ValueError(f"term cache limit must be positive, got {limit}")
    CACHE_LIMIT = limit
    clear_term_caches()


def _subject_token(token: str) -> tuple[str, int]:
    if token[:1] == "_":
        return _blank(token, 0, 0)
    return _iri(token, 0, 0)


def _predicate_token(token: str) -> tuple[str, int]:
    return _iri(token, 0, 0)


def _object_token(token: str) -> tuple[str, int]:
    c = token[:1]
    if c == '"':
        return _literal(token, 0, 0)
    if c == "_":
        return _blank(token, 0, 0)
    return _iri(token, 0, 0)


# A token these match is already a canonical term (absolute IRI, or literal with no escape,
# lower-case language tag or IRI datatype other than xsd:string): the common case of a new
# token, checked at once.
_CANONICAL_IRI = r'<[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20<>"{}|^`\\]*>'
_CANONICAL_SUBJECT = re.compile(_CANONICAL_IRI).fullmatch
_CANONICAL_OBJECT = re.compile(
    rf'{_CANONICAL_IRI}|"[^"\\\n\r]*"'
    rf'(?:\^\^(?!<http://www\.w3\.org/2001/XMLSchema#string>){_CANONICAL_IRI}|@[a-z]+(?:-[a-z0-9]+)*)?'
).fullmatch


def _learn(
    cache: dict[str, str],
    token: str,
    rule: Callable[[str], tuple[str, int]],
    canonical: Callable[[str], object],
) -> str | None:
    """The canonical term for a token never seen in this position, or None if it is not one."""
    if canonical(token):
        term = token
    else:
        try:
            term, end = rule(token)
        except NTriplesError:
            return None
        if end != len(token):
            return None
    if len(token) > CACHE_TOKEN_MAX:
        return term
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[token] = term
    return term


def _fast_path(line: str) -> Triple | None:
    """The triple of a canonical line ``<s> <p> <o> .``; None means: ask the full parser."""
    parts = line.split(" ", 3)
    if len(parts) != 4:
        return None
    s = _subjects.get(parts[0]) or _learn(_subjects, parts[0], _subject_token, _CANONICAL_SUBJECT)
    if not s:
        return None
    po = fast_tail(parts[1], parts[2], parts[3])
    return (s, *po) if po else None


def fast_tail(p: str, o: str, dot: str) -> tuple[str, str] | None:
    """The fast path after the subject: the canonical predicate and object of the last three
    pieces of ``line.split(" ", 3)``, or None (ask the full parser). Shared with the
    recorded-stream reader (``edgewave.shared.recorded``), which reads the subject itself."""
    if dot != ".\n" and dot != ".":
        # A literal with spaces, or CRLF: rejoin the object and split off the end again.
        o, _, dot = f"{o} {dot}".rpartition(" ")
        if dot != ".\n" and dot != "." and dot != ".\r\n":
            return None
    p = _predicates.get(p) or _learn(_predicates, p, _predicate_token, _CANONICAL_SUBJECT)
    o = _objects.get(o) or _learn(_objects, o, _object_token, _CANONICAL_OBJECT)
    if p and o:
        return p, o
    return None


def fast_subject(token: str) -> str | None:
    """The canonical subject for a raw token, through the fast path's cache; None if it is
    not one the fast path takes (the full parser decides)."""
    return _subjects.get(token) or _learn(_subjects, token, _subject_token, _CANONICAL_SUBJECT)


def fast_predicate(token: str) -> str | None:
    """``fast_subject`` for a predicate token."""
    return _predicates.get(token) or _learn(_predicates, token, _predicate_token, _CANONICAL_SUBJECT)


def subject_cache() -> dict[str, str]:
    """The fast path's cache of subject tokens, as ``object_cache`` is of object tokens."""
    return _subjects


def object_cache() -> dict[str, str]:
    """The fast path's cache of object tokens (raw token -> canonical term), for a loop that
    looks a token up itself before calling ``fast_object``; emptied in place, never replaced."""
    return _objects


def fast_object(token: str) -> str | None:
    """``fast_subject`` for an object token (the whole token: a literal without spaces)."""
    return _objects.get(token) or _learn(_objects, token, _object_token, _CANONICAL_OBJECT)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def parse_line(line: str, line_no: int = 0) -> Triple | None:
    """Parse one N-Triples(-star) line; None for a blank or comment line.

    A trailing ``\\n``/``\\r\\n`` is ignored. Raises NTriplesError naming ``line_no`` and the
    column when the line is malformed.
    """
    triple = _fast_path(line)
    if triple is not None:
        return triple
    return _parse_full(line, line_no)


def parse_lines(lines: Iterable[str], errors: list[NTriplesError] | None = None) -> Iterator[Triple]:
    """Parse lines (numbered from 1) lazily, skipping blank and comment lines.

    Strict by default: the first malformed line raises NTriplesError. With ``errors`` given,
    a malformed line is skipped and its error appended there, so one bad line from a sensor
    costs only that line (skip-and-count).
    """
    fast = _fast_path
    full = _parse_full
    for line_no, line in enumerate(lines, 1):
        triple = fast(line)
        if triple is None:
            try:
                triple = full(line, line_no)
            except NTriplesError as exc:
                if errors is None:
                    raise
                errors.append(exc)
                continue
            if triple is None:
                continue
        yield triple


def parse(text: str, errors: list[NTriplesError] | None = None) -> list[Triple]:
    """Parse a whole N-Triples(-star) document (any of CR, LF, CRLF ends a line)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.startswith("\ufeff"):  # a byte-order mark some editors write
        text = text[1:]
    # Split on LF only: str.splitlines would also split inside literals holding U+2028 & co.
    return list(parse_lines(text.split("\n"), errors))


def serialize_term(term: str) -> str:
    """A term as written in N-Triples: terms are canonical N-Triples already, so itself."""
    return term


def serialize(triple: Triple) -> str:
    """The N-Triples statement of a triple, ``s p o .`` (no newline)."""
    s, p, o = triple
    return f"{s} {p} {o} ."


def is_iri(term: str) -> bool:
    return term[:1] == "<" and term[1:2] != "<"


def is_literal(term: str) -> bool:
    return term[:1] == '"'


def is_blank(term: str) -> bool:
    return term[:2] == "_:"


def is_quoted(term: str) -> bool:
    return term[:3] == "<< "


@lru_cache(maxsize=VALUE_CACHE_SIZE)
def quoted_parts(term: str) -> Triple:
    """The (subject, predicate, object) of a quoted-triple term ``<< s p o >>``."""
    if not is_quoted(term):
        raise ValueError(f"not a quoted triple: {term!r}")
    try:
        triple, end = _quoted_triple(term, 0, 0, 0)
    except NTriplesError as exc:
        raise ValueError(f"not a quoted triple: {term!r} ({exc.reason})") from None
    if end != len(term):
        raise ValueError(f"not a quoted triple: {term!r}")
    return triple


def make_quoted(triple: Triple) -> str:
    """The quoted-triple term ``<< s p o >>`` of a triple of canonical terms."""
    s, p, o = triple
    return f"<< {s} {p} {o} >>"


@lru_cache(maxsize=VALUE_CACHE_SIZE)
def literal_parts(term: str) -> tuple[str, str | None, str | None]:
    """(lexical value, unescaped; datatype IRI term like ``<...#decimal>`` or None; language or None)."""
    close = term.rfind('"')
    if term[:1] != '"' or close < 1:
        raise ValueError(f"not a literal: {term!r}")
    body = term[1:close]
    lexical = _ESCAPE_RE.sub(lambda m: _ECHARS.get(m.group(3), m.group()), body) if "\\" in body else body
    suffix = term[close + 1 :]
    if not suffix:
        return lexical, None, None
    if suffix[0] == "@":
        return lexical, None, suffix[1:]
    if suffix.startswith("^^<"):
        return lexical, suffix[2:], None
    raise ValueError(f"not a literal: {term!r}")


def make_iri(iri: str) -> str:
    """The IRI term ``<iri>`` for an absolute IRI given without angle brackets."""
    if not _SCHEME_RE.match(iri):
        raise ValueError(f"not an absolute IRI: {iri!r}")
    return f"<{_escape_iri(iri)}>"


def make_literal(value: str, datatype: str | None = None, lang: str | None = None) -> str:
    """The canonical literal term for a lexical value, optionally typed or language-tagged.

    ``datatype`` may be an IRI term (``<http://...#decimal>``) or a bare IRI.
    """
    body = _escape_lexical(value)
    if lang is not None:
        if datatype is not None:
            raise ValueError("a literal has a language tag or a datatype, not both")
        if not _LANG_RE.fullmatch("@" + lang):
            raise ValueError(f"bad language tag: {lang!r}")
        return f'"{body}"@{lang.lower()}'
    if datatype is not None:
        if datatype[:1] == "<" and datatype[-1:] == ">":
            try:
                term, end = _iri(datatype, 0, 0)
            except NTriplesError as exc:
                raise ValueError(f"bad datatype {datatype!r}: {exc.reason}") from None
            if end != len(datatype):
                raise ValueError(f"bad datatype {datatype!r}")
        else:
            term = make_iri(datatype)
        if term == _XSD_STRING:
            return f'"{body}"'
        return f'"{body}"^^{term}'
    return f'"{body}"'


def make_blank(label: str) -> str:
    """The blank node term ``_:label``."""
    term = "_:" + label
    if not _bnode_re().fullmatch(term):
        raise ValueError(f"bad blank node label: {label!r}")
    return term
