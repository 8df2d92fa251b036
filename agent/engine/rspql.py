"""RSP-QL parser: query text to the :class:`~edgewave.agent.engine.query.Query` the network compiles.

A hand-written recursive-descent parser over a small regular-expression lexer. Hand-written
because the errors matter as much as the parses: every error names the line, the column and
what was expected there, in the user's words (``line 3, column 17: expected '}' or a triple
pattern, found 'FILTR'``), and because RSP-QL needs a few context-dependent tokens (durations
such as ``PT0.5S`` or ``5m`` inside ``[RANGE ...]``) that a grammar generator lexes badly.

Accepted language (a superset of what RSP4J/YASPER, RSP.js, C-SPARQL and Sparkwave write)::

    [PREFIX/BASE ...]
    [REGISTER (RSTREAM|ISTREAM|DSTREAM|QUERY|STREAM) name AS]    name: <iri>, prefixed or bare
    [PREFIX/BASE ...]                                             (a '.' after PREFIX is allowed)
    SELECT [DISTINCT|REDUCED] (* | ?v ...)
    FROM NAMED WINDOW w ON [STREAM] s [RANGE d [STEP d]]          RSP-QL: a named window
    FROM STREAM s [[RANGE d [STEP d | TUMBLING]]]                 C-SPARQL: the default window
    FROM [NAMED] <g>                                              a static graph (IRI ignored)
    [WHERE] { triples . WINDOW w { ... } FILTER(...) { ... } }

Triple patterns follow SPARQL 1.1 with SPARQL-star: ``<< s p o >>`` in subject or object
position (nested), and the annotation form ``s p o {| :confidence ?c |}``, which asserts the
triple pattern and annotates its quoted form.

Durations are ISO 8601 (``PT10S``, ``PT1M30S``, ``PT0.5S``, ``P1D``) or C-SPARQL (``10s``,
``5m``, ``1h``, ``100ms``, ``1d``).

A FILTER applies to the group it is written in: one in a plain nested ``{ }`` sees only the
variables bound inside that group, as in SPARQL (the others are unbound there); one in a
``WINDOW w { }`` block sees the whole query's, as RSP-QL queries comparing window data
with static thresholds expect. EP-SPARQL's temporal operators join groups the way UNION
does in SPARQL: ``{ A } SEQ { B } EQUALS { C }`` (also OPTIONALSEQ and EQUALSOPTIONAL, left to
right), and a FILTER may call getDURATION(), getSTARTTIME() and getENDTIME() (docs/engine.md,
"Temporal operators"). Not accepted, each with an error that says so: SEQOPTIONAL, OPTIONAL,
UNION, MINUS, GRAPH, BIND, VALUES, SERVICE, [NOT] EXISTS, subqueries, property paths, RDF
collections, expressions in SELECT, ORDER BY/GROUP BY/HAVING/LIMIT/OFFSET, and ASK,
CONSTRUCT and DESCRIBE queries. As SPARQL says, a blank node label belongs to one group,
and a '.' only follows a triples block, a group or a FILTER. The W3C's syntax tests hold
the parser to this (tests/differential/test_w3c_sparql.py).

Where patterns go: a triple pattern inside ``WINDOW w { }`` belongs to window ``w``. Outside
any WINDOW block it belongs to the C-SPARQL default window when the query has ``FROM STREAM``
clauses, and to static data (``window=None``) otherwise. The default window is marked
``with_static``: as in C-SPARQL (streams and ``FROM`` graphs form one dataset) and Sparkwave
(static triples sit in every alpha memory), its patterns match static triples too, which is
what Figure 4 of the Sparkwave paper needs for its ``sioc:account_of`` graph. Several ``FROM STREAM`` clauses make
one default window that reads all of those streams (``WindowSpec.more_streams``): C-SPARQL
merges its streams into one dataset, so a pattern matches a triple from any of them. The
window's width is the largest RANGE and its step the smallest STEP among them. A C-SPARQL stream
without RANGE (Sparkwave's Listing 2 sets the width outside the query) takes
``default_width_ms``; without one it is an error.

Terms are produced in the canonical form of docs/ARCHITECTURE.md. Blank nodes in
patterns (``_:b``, ``[]``, ``[ :p :o ]``) are non-distinguished variables named ``?_:b`` /
``?_:anonN``; the colon keeps them apart from user variables and out of ``SELECT *``.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from decimal import Decimal, InvalidOperation, ROUND_HALF_UP
from functools import lru_cache
from typing import Callable, NamedTuple
from urllib.parse import urljoin

from . import filters
from ...shared.ntriples import make_iri, make_literal, make_quoted
from ...shared.vocab import RDF_TYPE, XSD_NS
from .query import (
    TEMPORAL_OPERATORS, Absence, Query, QuerySyntaxError, TemporalOperator, TriplePattern, WindowSpec, is_var,
    pattern_variables,
)

__all__ = ["parse_query", "parse_duration", "QuerySyntaxError"]

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")

# Bounds that keep a hostile query from exhausting the interpreter's stack: groups,
# blank-node property lists, annotations, quoted triples, brackets and argument lists
# nest at most MAX_NESTING deep (each level is a few recursive calls here), and a FILTER
# expression tree is at most MAX_EXPRESSION_DEPTH deep (compiling and evaluating it
# recurse once or twice per level; a chain such as ``a || b || c`` is one level per
# operator). Real patterns stay far below both; beyond them the query is refused with
# a located QuerySyntaxError.
MAX_NESTING = 32
MAX_EXPRESSION_DEPTH = 100
# A window longer than a signed 64-bit number of milliseconds is no window.
MAX_DURATION_MS = 2 ** 63 - 1
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

# --------------------------------------------------------------------------- lexer

_PN_CHARS_BASE_ASCII = "A-Za-z"
_PN_CHARS_BASE_UNICODE = (
    "\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D"
    "\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF"
)
_PN_CHARS_EXTRA_UNICODE = "\u00B7\u0300-\u036F\u203F-\u2040"
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_ECHAR = r"\\[tbnrf\\\"']"
_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"


@lru_cache(maxsize=2)
def _token_re(unicode: bool) -> re.Pattern[str]:
    """The lexer's one regex. The SPARQL name characters include large Unicode ranges
    whose compilation is a tenth of a second (most of a short run's start-up); an ASCII
    query text is lexed with them left out, which matches exactly the same on ASCII."""
    base = _PN_CHARS_BASE_ASCII + (_PN_CHARS_BASE_UNICODE if unicode else "")
    extra = _PN_CHARS_EXTRA_UNICODE if unicode else ""
    pn_chars_u = base + "_"
    pn_chars = pn_chars_u + r"\-0-9" + extra
    pn_prefix = f"[{base}](?:[{pn_chars}.]*[{pn_chars}])?"
    pn_local = f"(?:[{pn_chars_u}:0-9]|{_PLX})(?:(?:[{pn_chars}.:]|{_PLX})*(?:[{pn_chars}:]|{_PLX}))?"
    varname = f"[{pn_chars_u}0-9][{pn_chars_u}0-9{extra}]*"
    return re.compile(
        "|".join(
            f"(?P<{name}>{pattern})"
            for name, pattern in [
                ("IRI", r"<(?:[^<>\"{}|^`\\\x00-\x20]|" + _UCHAR + r")*>"),
                ("QOPEN", r"<<"),
                ("QCLOSE", r">>"),
                ("LONG", r"'''(?:(?:'|'')?(?:[^'\\]|" + _ECHAR + "|" + _UCHAR + r"))*'''"
                         r'|"""(?:(?:"|"")?(?:[^"\\]|' + _ECHAR + "|" + _UCHAR + r'))*"""'),
                ("STRING", r"'(?:[^'\\\n\r]|" + _ECHAR + "|" + _UCHAR + r")*'"
                           r'|"(?:[^"\\\n\r]|' + _ECHAR + "|" + _UCHAR + r')*"'),
                ("VAR", r"[?$]" + varname),
                ("BNODE", f"_:[{pn_chars_u}0-9](?:[{pn_chars}.]*[{pn_chars}])?"),
                ("PNAME", f"(?:{pn_prefix})?:(?:{pn_local})?"),
                ("DOUBLE", r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)[eE][+-]?[0-9]+"),
                ("DECIMAL", r"[0-9]*\.[0-9]+"),
                ("INTEGER", r"[0-9]+"),
                ("LANGTAG", r"@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*"),
                ("NAME", r"[A-Za-z_][A-Za-z0-9_]*"),
                ("PUNCT", r"\^\^|&&|\{\||\|\}|\|\||!=|<=|>=|[{}()\[\].;,*=<>!+\-/|^]"),
            ]
        )
    )


_SKIP_RE = re.compile(r"(?:\s+|#[^\n]*)*")
_DURATION_WORD_RE = re.compile(r"[A-Za-z0-9.]+")


class _Token(NamedTuple):
    kind: str  # IRI QOPEN QCLOSE LONG STRING VAR BNODE PNAME DOUBLE DECIMAL INTEGER LANGTAG NAME PUNCT EOF
    text: str
    pos: int
    end: int

    def describe(self) -> str:
        if self.kind == "EOF":
            return "end of query"
        text = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"'{text}'"

    def is_punct(self, value: str) -> bool:
        return self.kind == "PUNCT" and self.text == value

    def is_word(self, *words: str) -> bool:
        return self.kind == "NAME" and self.text.upper() in words


class _Lexer:
    """Tokens on demand, with one token of look-ahead; positions map to line and column."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._peeked: _Token | None = None
        self._token_re = _token_re(not text.isascii())
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def location(self, pos: int) -> tuple[int, int]:
        line = bisect_right(self._line_starts, pos)
        return line, pos - self._line_starts[line - 1] + 1

    def peek(self) -> _Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> _Token:
        token = self.peek()
        self._peeked = None
        return token

    def _scan(self) -> _Token:
        pos = _SKIP_RE.match(self.text, self.pos).end()
        if pos >= len(self.text):
            self.pos = pos
            return _Token("EOF", "", pos, pos)
        m = self._token_re.match(self.text, pos)
        if m is None:
            char = self.text[pos]
            line, column = self.location(pos)
            if char in "\"'":
                raise QuerySyntaxError("unterminated or malformed string literal", line, column, ("a string",))
            raise QuerySyntaxError(f"unexpected character {char!r}", line, column, ())
        self.pos = m.end()
        return _Token(m.lastgroup, m.group(), pos, m.end())

    def duration_word(self) -> _Token:
        """The raw word at the current position (a duration lexes differently from SPARQL)."""
        if self._peeked is not None:
            self.pos = self._peeked.pos
            self._peeked = None
        pos = _SKIP_RE.match(self.text, self.pos).end()
        m = _DURATION_WORD_RE.match(self.text, pos)
        if m is None:
            self.pos = pos
            return self.next()
        self.pos = m.end()
        return _Token("NAME", m.group(), pos, m.end())


# --------------------------------------------------------------------------- terms

_ECHAR_VALUES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", "\\": "\\", '"': '"', "'": "'"}
_ESCAPE_RE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_UCHAR_RE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\U([0-9A-Fa-f]{8})")
_PN_LOCAL_ESC_RE = re.compile(r"\\(.)")


def _code_point(hex_digits: str) -> str:
    value = int(hex_digits, 16)
    if value > 0x10FFFF:
        raise ValueError(f"\\U{hex_digits} is beyond the last Unicode code point")
    return chr(value)


def _whole_characters(text: str) -> str:
    """Escaped UTF-16 surrogate pairs joined into their character (as the N-Triples codec
    does for Java tools); a lone surrogate is not a character."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise ValueError("an escaped lone surrogate (\\uD800-\\uDFFF) is not a character") from None


def _unescape_string(body: str) -> str:
    """A string literal's body with its escapes decoded; ValueError for an impossible one."""
    def replace(m: re.Match) -> str:
        if m.group(1) or m.group(2):
            return _code_point(m.group(1) or m.group(2))
        return _ECHAR_VALUES[m.group(3)]

    return _whole_characters(_ESCAPE_RE.sub(replace, body)) if "\\" in body else body


def _decode_uchars(text: str) -> str:
    """An IRI's text with its \\u escapes decoded; ValueError for an impossible one."""
    if "\\" not in text:
        return text
    return _whole_characters(_UCHAR_RE.sub(lambda m: _code_point(m.group(1) or m.group(2)), text))


def literal_term(lexical: str, datatype: str | None = None, lang: str | None = None) -> str:
    """The canonical term for a literal (the codec's own rule); ``datatype`` bare IRI."""
    if datatype is not None and not _SCHEME_RE.match(datatype):
        return '"' + make_literal(lexical)[1:-1] + '"^^<' + datatype + ">"  # relative datatype
    return make_literal(lexical, datatype=datatype, lang=lang)


def iri_term(iri: str) -> str:
    """The canonical term for an IRI given without brackets (relative ones kept)."""
    if _SCHEME_RE.match(iri):
        return make_iri(iri)
    return "<" + iri + ">"


def _is_ground(term: object) -> bool:
    return isinstance(term, str) and not is_var(term)


# --------------------------------------------------------------------------- durations

_ISO_DURATION_RE = re.compile(
    r"P(?:(?P<Y>\d+(?:\.\d+)?)Y)?(?:(?P<MO>\d+(?:\.\d+)?)M)?(?:(?P<W>\d+(?:\.\d+)?)W)?(?:(?P<D>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<H>\d+(?:\.\d+)?)H)?(?:(?P<MI>\d+(?:\.\d+)?)M)?(?:(?P<S>\d+(?:\.\d+)?)S)?)?\Z",
    re.I,
)
_CSPARQL_DURATION_RE = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h|d)\Z", re.I)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration(text: str) -> int:
    """Milliseconds in an ISO 8601 (``PT1M30S``) or C-SPARQL (``5m``) duration; ValueError if bad."""
    m = _CSPARQL_DURATION_RE.match(text)
    if m:
        total = Decimal(m.group("n")) * _UNIT_MS[m.group("unit").lower()]
    else:
        m = _ISO_DURATION_RE.match(text)
        if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
            raise ValueError(f"not a duration: {text!r} (expected e.g. PT10S, PT0.5S, P1D, 10s, 5m, 100ms)")
        if m.group("Y") or m.group("MO"):
            raise ValueError(f"calendar durations (years, months) have no fixed length: {text!r}")
        total = Decimal(0)
        for group, unit in (("W", "w"), ("D", "d"), ("H", "h"), ("MI", "m"), ("S", "s")):
            if m.group(group):
                total += Decimal(m.group(group)) * _UNIT_MS[unit]
    try:
        ms = int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))
    except InvalidOperation:  # more digits than the decimal context holds: far beyond the bound
        ms = MAX_DURATION_MS + 1
    if ms > MAX_DURATION_MS:
        raise ValueError(f"a window duration must be at most {MAX_DURATION_MS} ms: {text[:40]!r}")
    if ms <= 0:
        raise ValueError(f"a window duration must be at least 1 ms: {text!r}")
    return ms


# --------------------------------------------------------------------------- parser

_TRIPLE_START = ("VAR", "IRI", "PNAME", "BNODE", "QOPEN")
_UNSUPPORTED_GROUP_WORDS = ("OPTIONAL", "UNION", "MINUS", "GRAPH", "BIND", "VALUES", "SERVICE")
# At most this many OPTIONALSEQ/EQUALSOPTIONAL in one query: each doubles the chains it compiles to.
MAX_OPTIONAL_OPERATORS = 3
# At most this many temporal operators in one query: each match tests every one of them (real
# patterns use a handful; a hostile one must not make every match cost thousands of tests).
MAX_TEMPORAL_OPERATORS = 64


class _Parser:
    """One parse: a method per grammar rule, each consuming tokens from the lexer."""

    def __init__(self, text: str, default_width_ms: int | None):
        self.text = text
        self.lexer = _Lexer(text)
        self.default_width_ms = default_width_ms
        self.prefixes: dict[str, str] = {}
        self.base: str | None = None
        self.windows: dict[str, WindowSpec] = {}
        self.streams: list[tuple[str, int | None, int | None, _Token]] = []  # C-SPARQL FROM STREAM
        self.patterns: list[TriplePattern] = []
        self.filters: list[tuple[filters.Expr, str]] = []  # each FILTER's tree and text, compiled at the end
        self.groups: list[int] = []  # the open { } groups, innermost last, by number
        self.groups_opened = 0
        self.group_patterns: dict[int, range] = {}  # group number -> the patterns written inside it
        self.filter_groups: list[int] = []  # the group each FILTER is written in
        self.temporal: list[tuple[TemporalOperator, _Token]] = []
        self.absence: tuple[Absence, _Token] | None = None
        self.current_window: str | None = None  # the window of the group being read
        self.construct_token: _Token | None = None  # where a rule's CONSTRUCT was written
        self.blank_node_groups: dict[str, int] = {}  # _:label -> the group it belongs to
        self.anon = 0
        self.default_window: str | None = None  # the C-SPARQL window, when FROM STREAM is used
        self.nesting = 0  # how many nesting constructs (see MAX_NESTING) are open
        self.expression_depths: dict[int, tuple[tuple, int]] = {}  # id(node) -> (node, depth)

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, token: _Token | int, expected: tuple[str, ...] = ()) -> QuerySyntaxError:
        pos = token if isinstance(token, int) else token.pos
        line, column = self.lexer.location(pos)
        return QuerySyntaxError(message, line, column, expected)

    def expected(self, what: str, token: _Token | None = None) -> QuerySyntaxError:
        token = token or self.lexer.peek()
        return self.error(f"expected {what}, found {token.describe()}", token, (what,))

    def expect_punct(self, value: str, what: str | None = None) -> _Token:
        token = self.lexer.peek()
        if not token.is_punct(value):
            raise self.expected(what or f"'{value}'")
        return self.lexer.next()

    def expect_word(self, *words: str, what: str | None = None) -> _Token:
        token = self.lexer.peek()
        if not token.is_word(*words):
            raise self.expected(what or " or ".join(words))
        return self.lexer.next()

    def accept_word(self, *words: str) -> _Token | None:
        return self.lexer.next() if self.lexer.peek().is_word(*words) else None

    def decoded(self, token: _Token, decode: Callable[[str], str]) -> str:
        """The text inside an IRI or string token, escapes decoded; a located error if one is impossible."""
        body = token.text[3:-3] if token.kind == "LONG" else token.text[1:-1]
        try:
            return decode(body)
        except ValueError as exc:
            raise self.error(str(exc), token, ("a valid escape",)) from None

    def accept_punct(self, value: str) -> _Token | None:
        return self.lexer.next() if self.lexer.peek().is_punct(value) else None

    def enter(self, token: _Token) -> None:
        """One more level of nesting opens at ``token``; refused past MAX_NESTING."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise self.error(f"nested deeper than {MAX_NESTING} levels (groups, brackets, '[ ]', '<< >>' "
                             "and '{| |}' count)", token, ())

    def leave(self) -> None:
        self.nesting -= 1

    def built(self, node: tuple, token: _Token | int) -> tuple:
        """An expression node just built; refused when its tree is deeper than MAX_EXPRESSION_DEPTH."""
        depth = 0
        for child in node[1:]:
            for item in (child if isinstance(child, list) else (child,)):
                if isinstance(item, tuple):
                    known = self.expression_depths.get(id(item))
                    depth = max(depth, known[1] if known is not None and known[0] is item else 1)
        depth += 1
        if depth > MAX_EXPRESSION_DEPTH:
            raise self.error(f"FILTER expression nested deeper than {MAX_EXPRESSION_DEPTH} operators "
                             "(use IN ( ... ) for a long list of alternatives)", token, ())
        self.expression_depths[id(node)] = (node, depth)
        return node

    # ------------------------------------------------------------------ query
    def query(self) -> Query:
        self.prologue()
        name = "query"
        registered = bool(self.accept_word("REGISTER"))
        if registered:
            self.expect_word("RSTREAM", "ISTREAM", "DSTREAM", "QUERY", "STREAM",
                             what="RSTREAM, ISTREAM, DSTREAM or QUERY")
            name = self.query_name()
            self.expect_word("AS")
            self.prologue()
        token = self.lexer.peek()
        construct: list[TriplePattern] = []
        if token.is_word("CONSTRUCT") and registered:
            construct = self.construct_template()
            distinct, select = False, []
        else:
            if token.is_word("ASK", "CONSTRUCT", "DESCRIBE"):
                raise self.error(f"{token.text.upper()} queries are not supported: a pattern is a SELECT query "
                                 "(or a rule, REGISTER RSTREAM <stream> AS CONSTRUCT ...)", token, ("SELECT",))
            if not token.is_word("SELECT"):
                raise self.expected("SELECT" if registered else "REGISTER, PREFIX or SELECT")
            distinct, select = self.select_clause()
        while self.lexer.peek().is_word("FROM"):
            self.dataset_clause()
        self.finish_default_window()
        self.accept_word("WHERE")
        if not self.lexer.peek().is_punct("{"):
            raise self.expected("'{'" if self.windows or self.streams else "FROM or '{'")
        self.group(window=self.default_window)
        consumption = self.consume_clause()
        token = self.lexer.peek()
        if token.is_word("VALUES"):
            self.refuse_unsupported(token)
        if token.is_word("ORDER", "GROUP", "HAVING", "LIMIT", "OFFSET"):
            word = {"ORDER": "ORDER BY", "GROUP": "GROUP BY"}.get(token.text.upper(), token.text.upper())
            raise self.error(f"{word} is not supported: a pattern's matches are reported as they "
                             "complete, with no solution modifiers", token, ("end of query",))
        if token.kind != "EOF":
            raise self.expected("end of query", token)
        if not self.patterns:
            raise self.error("the query has no triple patterns", token, ("a triple pattern",))
        compiled_filters = tuple(filters.compile_filter(expr, text) for expr, text in self.filters)
        query = Query(
            name=name,
            select=tuple(v for v, _ in select),
            windows=dict(self.windows),
            patterns=tuple(self.patterns),
            filters=compiled_filters,
            text=self.text,
            prefixes=dict(self.prefixes),
            distinct=distinct,
            temporal=tuple(op for op, _ in self.temporal),
            absence=self.absence[0] if self.absence is not None else None,
            consumption=consumption[0] if consumption else "unrestricted",
            construct=tuple(construct),
            filter_groups=tuple(frozenset(self.group_patterns[g]) for g in self.filter_groups),
        )
        known = set(query.variables())
        self.check_temporal()
        if consumption and consumption[0] != "unrestricted" and (self.temporal or self.absence):
            raise self.error("CONSUME RECENT and CHRONOLOGICAL apply to conjunctive patterns, not to temporal "
                             "operators or absences", consumption[1], ())
        for compiled in compiled_filters:
            # a variable no pattern binds stays unbound (BOUND is false, other uses are errors);
            # the network must not wait for it before evaluating the filter
            compiled.variables = compiled.variables & known
        for variable in pattern_variables(construct):
            if variable not in known and not variable.startswith("_:"):
                raise self.error(f"the CONSTRUCT template's ?{variable} does not occur in the WHERE clause",
                                 self.construct_token, ("a variable of the WHERE clause",))
        for variable, token in select:
            if variable not in known:
                raise self.error(f"SELECT variable ?{variable} does not occur in any triple pattern", token,
                                 ("a variable of the WHERE clause",))
        return query

    def construct_template(self) -> list[TriplePattern]:
        """``CONSTRUCT { triples }`` of a chained rule (rules.py): the template's triples, blank
        nodes as ``?_:`` variables (fresh per match)."""
        self.construct_token = self.lexer.next()
        self.enter(self.expect_punct("{"))
        self.groups_opened += 1
        self.groups.append(self.groups_opened)
        first = len(self.patterns)
        while not self.accept_punct("}"):
            token = self.lexer.peek()
            if not (token.kind in _TRIPLE_START or token.is_punct("[")):
                raise self.expected("a triple or '}' in the CONSTRUCT template", token)
            self.triples(None)
            if not self.accept_punct("."):
                self.expect_punct("}", "'.' or '}'")
                break
        self.groups.pop()
        self.leave()
        template = self.patterns[first:]
        del self.patterns[first:]
        if not template:
            raise self.error("the CONSTRUCT template is empty", self.construct_token, ("a triple",))
        for tp in template:
            if isinstance(tp.s, TriplePattern) or isinstance(tp.o, TriplePattern) or is_var(tp.p):
                raise self.error("a CONSTRUCT template triple needs a constant predicate and no quoted triple",
                                 self.construct_token, ())
        return template

    def consume_clause(self) -> tuple[str, _Token] | None:
        """``CONSUME UNRESTRICTED|RECENT|CHRONOLOGICAL`` after the WHERE group (consumption.py)."""
        keyword = self.accept_word("CONSUME")
        if keyword is None:
            return None
        token = self.lexer.peek()
        if not token.is_word("UNRESTRICTED", "RECENT", "CHRONOLOGICAL"):
            raise self.expected("UNRESTRICTED, RECENT or CHRONOLOGICAL after CONSUME", token)
        self.lexer.next()
        return token.text.lower(), keyword

    def prologue(self) -> None:
        while True:
            token = self.lexer.peek()
            if token.is_word("PREFIX"):
                self.lexer.next()
                prefix = self.lexer.next()
                if prefix.kind != "PNAME" or not prefix.text.endswith(":"):
                    raise self.expected("a prefix such as 'ex:'", prefix)
                iri = self.lexer.next()
                if iri.kind != "IRI":
                    raise self.expected("an IRI in angle brackets", iri)
                self.prefixes[prefix.text[:-1]] = self.resolve(self.decoded(iri, _decode_uchars), iri)
                self.accept_punct(".")  # C-SPARQL and Sparkwave write "PREFIX p: <...>."
            elif token.is_word("BASE"):
                self.lexer.next()
                iri = self.lexer.next()
                if iri.kind != "IRI":
                    raise self.expected("an IRI in angle brackets", iri)
                self.base = self.resolve(self.decoded(iri, _decode_uchars), iri)
            else:
                return

    def resolve(self, iri: str, token: _Token) -> str:
        if self.base is None or _SCHEME_RE.match(iri):
            return iri
        try:
            resolved = urljoin(self.base, iri)
        except ValueError as exc:  # e.g. a base <http://[/> that is no URL ("Invalid IPv6 URL")
            raise self.error(f"cannot resolve <{iri[:60]}> against BASE <{self.base[:60]}>: {exc}", token,
                             ("an IRI",)) from None
        # urljoin drops an empty fragment or query ("PREFIX : <#>"); RFC 3986 keeps it
        if iri[-1:] in ("#", "?") and resolved[-1:] != iri[-1:]:
            resolved += iri[-1]
        return resolved

    def query_name(self) -> str:
        token = self.lexer.next()
        if token.kind == "IRI":
            return self.decoded(token, _decode_uchars)
        if token.kind == "PNAME":
            return self.expand_pname(token)[1:-1]
        if token.kind == "NAME" and not token.is_word("AS"):
            return token.text
        raise self.expected("a query name (an IRI, a prefixed name or a word)", token)

    def select_clause(self) -> tuple[bool, list[tuple[str, _Token]]]:
        self.expect_word("SELECT")
        distinct = bool(self.accept_word("DISTINCT"))
        if not distinct:
            self.accept_word("REDUCED")
        if self.accept_punct("*"):
            return distinct, []
        select: list[tuple[str, _Token]] = []
        while True:
            token = self.lexer.peek()
            if token.is_punct("("):
                raise self.error("expressions in SELECT ((... AS ?v)) are not supported by the engine; "
                                 "select variables, and use FILTER to test values", token, ("a variable",))
            if token.kind != "VAR":
                break
            self.lexer.next()
            select.append((token.text[1:], token))
        if not select:
            raise self.expected("'*' or a variable")
        return distinct, select

    # ------------------------------------------------------------------ dataset: windows and streams
    def dataset_clause(self) -> None:
        self.expect_word("FROM")
        if self.accept_word("NAMED"):
            if self.accept_word("WINDOW"):
                self.named_window()
            else:
                self.iri("a graph IRI")  # FROM NAMED <g>: static data, nothing to record
            return
        if self.accept_word("STREAM"):
            stream_token = self.lexer.peek()
            stream = self.iri("a stream IRI")
            width = step = None
            if self.lexer.peek().is_punct("["):
                width, step = self.window_bounds(csparql=True)
            self.streams.append((stream, width, step, stream_token))
            return
        if self.lexer.peek().kind in ("IRI", "PNAME"):
            self.iri("a graph IRI")  # FROM <g>: the static graph; its triples arrive via add_static
            return
        raise self.expected("NAMED WINDOW, STREAM or a graph IRI")

    def named_window(self) -> None:
        token = self.lexer.peek()
        name = self.iri("a window name (an IRI)")
        if name in self.windows:
            raise self.error(f"window {name} is declared twice", token, ())
        self.expect_word("ON")
        self.accept_word("STREAM")
        stream = self.iri("a stream IRI")
        if not self.lexer.peek().is_punct("["):
            raise self.expected("'[RANGE <duration> STEP <duration>]'")
        width, step = self.window_bounds(csparql=False)
        self.windows[name] = WindowSpec(name=name, stream=stream, width_ms=width, step_ms=step)

    def window_bounds(self, csparql: bool) -> tuple[int, int | None]:
        self.expect_punct("[")
        self.expect_word("RANGE", what="RANGE")
        width = self.duration()
        step = None
        if self.accept_word("STEP", "SLIDE"):
            step = self.duration()
        elif csparql and self.accept_word("TUMBLING"):
            step = width
        self.expect_punct("]", "STEP or ']'" if step is None else "']'")
        return width, step

    def duration(self) -> int:
        token = self.lexer.duration_word()
        if token.text.upper() == "TRIPLES":
            raise self.error("count-based windows (RANGE TRIPLES) are not supported", token, ("a duration",))
        if token.kind == "EOF" or (token.kind == "PUNCT"):
            raise self.expected("a duration such as PT10S or 10s", token)
        try:
            return parse_duration(token.text)
        except ValueError as exc:
            raise self.error(str(exc), token, ("a duration such as PT10S or 10s",)) from None

    def finish_default_window(self) -> None:
        if not self.streams:
            return
        widths = []
        for stream, width, _, token in self.streams:
            if width is None:
                if self.default_width_ms is None:
                    raise self.error(
                        f"stream {stream} has no window: expected '[RANGE <duration>]' after it "
                        "(or give parse_query a default_width_ms)", token, ("[RANGE <duration>]",))
                width = self.default_width_ms
            widths.append(width)
        steps = [step for _, _, step, _ in self.streams if step is not None]
        first = self.streams[0][0]
        more = tuple(dict.fromkeys(s for s, _, _, _ in self.streams[1:] if s != first))
        if first in self.windows:
            raise self.error(f"{first} names both a window and a stream", self.streams[0][3], ())
        self.windows[first] = WindowSpec(name=first, stream=first, width_ms=max(widths),
                                         step_ms=min(steps) if steps else None, more_streams=more,
                                         with_static=True)
        self.default_window = first

    # ------------------------------------------------------------------ graph patterns
    def group(self, window: str | None) -> None:
        self.enter(self.expect_punct("{"))
        self.groups_opened += 1
        self.groups.append(self.groups_opened)
        first_pattern = len(self.patterns)
        outer_window, self.current_window = self.current_window, window
        dot_allowed = False  # one '.' after a triples block, a nested group or a FILTER; never two
        while True:
            token = self.lexer.peek()
            if token.is_punct("}"):
                self.lexer.next()
                self.group_patterns[self.groups.pop()] = range(first_pattern, len(self.patterns))
                self.current_window = outer_window
                self.leave()
                return
            if token.is_punct("."):
                if not dot_allowed:
                    raise self.expected("'}' or a triple pattern", token)
                self.lexer.next()
                dot_allowed = False
                continue
            dot_allowed = True
            if token.is_punct("{"):
                self.temporal_element(window)
                continue
            if token.is_word("WINDOW"):
                self.window_block(window)
                continue
            if token.is_word("FILTER"):
                self.filter()
                continue
            if token.kind in _TRIPLE_START or token.is_punct("["):
                self.triples(window)
                following = self.lexer.peek()
                if not (following.is_punct(".") or following.is_punct("}") or following.is_word("FILTER", "WINDOW")
                        or following.is_punct("{")):
                    self.refuse_unsupported(following)
                    raise self.expected("'.', ';', ',' or '}'", following)
                continue
            if token.is_punct("("):
                raise self.error("RDF collections are not supported in patterns", token, ("a triple pattern",))
            if token.is_word("SELECT"):
                raise self.error("subqueries are not supported by the engine", token, ("a triple pattern",))
            self.refuse_unsupported(token)
            raise self.expected("'}' or a triple pattern", token)

    def refuse_unsupported(self, token: _Token) -> None:
        if token.is_word(*_UNSUPPORTED_GROUP_WORDS):
            raise self.error(f"{token.text.upper()} is not supported by the engine (conjunctive patterns "
                             "with FILTER only)", token, ("'}'", "a triple pattern"))

    def nested_group(self, window: str | None) -> None:
        """A ``{ }`` group inside another: its triple patterns join the query's, but its FILTERs
        see only the variables bound inside it (SPARQL's scope: in ``{ ?x :p ?v { FILTER(?v = 1) } }``
        the inner ?v is unbound, so the filter fails). A FILTER in a WINDOW block, by contrast,
        sees the whole query, as RSP-QL queries that test window data against static
        thresholds expect."""
        first_pattern, first_filter = len(self.patterns), len(self.filters)
        self.group(window)
        inside = set(pattern_variables(self.patterns[first_pattern:]))

        def scoped(name: str) -> str:
            return name if name in inside or name.startswith("_:") else f"_:outside-group:{name}"

        for i in range(first_filter, len(self.filters)):
            expr, text = self.filters[i]
            if not filters.variables_of(expr) <= inside:
                self.filters[i] = (filters.rename_variables(expr, scoped), text)

    def temporal_element(self, window: str | None) -> None:
        """A nested group, or groups joined by EP-SPARQL's temporal operators, left to right:
        ``{ A } SEQ { B } SEQ { C }`` (docs/engine.md, "Temporal operators")."""
        first = len(self.patterns)
        self.nested_group(window)
        left = frozenset(range(first, len(self.patterns)))
        while True:
            token = self.lexer.peek()
            if token.is_word("SEQOPTIONAL"):
                raise self.error("SEQOPTIONAL is refused: a later triple would withdraw its matches (its "
                                 "results are not monotonic in time, as the EP-SPARQL paper shows); write the "
                                 "optional part first, with OPTIONALSEQ", token,
                                 ("SEQ", "EQUALS", "OPTIONALSEQ", "EQUALSOPTIONAL"))
            if not token.is_word(*TEMPORAL_OPERATORS):
                return
            if len(self.temporal) >= MAX_TEMPORAL_OPERATORS:  # refused as soon as it is seen
                raise self.error(f"at most {MAX_TEMPORAL_OPERATORS} temporal operators in one query", token, ())
            self.lexer.next()
            if not self.lexer.peek().is_punct("{"):
                raise self.expected(f"'{{' after {token.text.upper()}")
            start = len(self.patterns)
            self.nested_group(window)
            right = frozenset(range(start, len(self.patterns)))
            for operand in (left, right):
                if not any(self.patterns[i].window is not None for i in operand):
                    raise self.error(f"each side of {token.text.upper()} needs a triple pattern over a stream "
                                     "(a group of static data has no time interval)", token,
                                     ("groups of streamed triple patterns",))
            self.temporal.append((TemporalOperator(token.text.upper(), left, right), token))
            left = left | right

    def check_temporal(self) -> None:
        """What the engine cannot compile in a query with temporal operators or an absence,
        refused where written."""
        windows = {tp.window for tp in self.patterns if tp.window is not None}
        if self.absence is not None:
            absence, token = self.absence
            if self.temporal:
                raise self.error("FILTER NOT EXISTS ... WITHIN cannot be combined with temporal operators in one "
                                 "query", token, ())
            if len(windows) > 1:
                raise self.error("FILTER NOT EXISTS ... WITHIN works inside one window; this query reads several",
                                 token, ("one WINDOW block",))
            rest = [tp for i, tp in enumerate(self.patterns) if i not in absence.patterns]
            if not any(tp.window is not None for tp in rest):
                raise self.error("FILTER NOT EXISTS ... WITHIN needs a triple pattern over a stream beside it: "
                                 "the absence is timed from its match", token, ("a triple pattern",))
        optional = [(op, token) for op, token in self.temporal if op.optional]
        if self.temporal and len(windows) > 1:
            raise self.error("temporal operators work inside one window; this query reads several",
                             self.temporal[0][1], ("one WINDOW block",))
        if len(optional) > MAX_OPTIONAL_OPERATORS:
            raise self.error(f"at most {MAX_OPTIONAL_OPERATORS} OPTIONALSEQ/EQUALSOPTIONAL in one query",
                             optional[-1][1], ())
        for op, token in optional:
            if any(other.optional and other.left & op.left and other is not op for other, _ in optional):
                raise self.error(f"an optional part of {op.kind} may not hold another optional part", token, ())
            inside = set(pattern_variables([self.patterns[i] for i in op.left]))
            required = set(pattern_variables([self.patterns[i] for i in op.right]))
            elsewhere = set(pattern_variables([tp for i, tp in enumerate(self.patterns)
                                               if i not in op.left and i not in op.right]))
            loose = sorted(v for v in inside & elsewhere - required if not v.startswith("_:"))
            if loose:
                raise self.error(f"the optional part of {op.kind} shares ?{loose[0]} with the rest of the query "
                                 f"but not with its required part: name ?{loose[0]} in the required part too "
                                 "(a well-designed pattern)", token, ())

    def window_block(self, outer: str | None) -> None:
        keyword = self.lexer.next()
        if outer is not None and outer != self.default_window:
            raise self.error("WINDOW blocks cannot be nested", keyword, ("a triple pattern",))
        token = self.lexer.peek()
        if token.kind == "VAR":
            raise self.error("WINDOW with a variable is not supported; name a declared window", token,
                             ("a window name",))
        name = self.iri("a window name")
        if name not in self.windows or name == self.default_window:
            declared = ", ".join(w for w in self.windows if w != self.default_window) or "none"
            raise self.error(f"window {name} is not declared with FROM NAMED WINDOW (declared: {declared})",
                             token, ("a declared window",))
        self.group(name)

    def triples(self, window: str | None) -> None:
        token = self.lexer.peek()
        if token.is_punct("["):
            subject = self.blank_node_property_list(window)
            if self.lexer.peek().is_punct(".") or self.lexer.peek().is_punct("}"):
                return  # "[ :p :o ] ." alone is a complete triples block
        else:
            subject = self.subject_term(window)
        self.property_list(subject, window)

    def property_list(self, subject, window: str | None) -> None:
        while True:
            predicate = self.verb()
            while True:
                obj = self.object_term(window)
                self.add_pattern(TriplePattern(subject, predicate, obj, window))
                annotation = self.accept_punct("{|")
                if annotation:  # SPARQL-star annotation: s p o {| :conf ?c |}
                    self.enter(annotation)
                    if _is_ground(subject) and _is_ground(predicate) and _is_ground(obj):
                        quoted = make_quoted((subject, predicate, obj))
                    else:
                        quoted = TriplePattern(subject, predicate, obj, None)
                    self.property_list(quoted, window)
                    self.expect_punct("|}", "'|}' or ';'")
                    self.leave()
                if not self.accept_punct(","):
                    break
            if not self.accept_punct(";"):
                return
            while self.accept_punct(";"):
                pass
            token = self.lexer.peek()
            if not (token.kind in ("IRI", "PNAME", "VAR") or (token.kind == "NAME" and token.text == "a")):
                return  # a trailing ';' (SPARQL allows it before '.', '}', FILTER, a group ...)

    def add_pattern(self, pattern: TriplePattern) -> None:
        self.patterns.append(pattern)

    def verb(self) -> str:
        token = self.lexer.peek()
        if token.kind == "NAME" and token.text == "a":
            self.lexer.next()
            return RDF_TYPE
        if token.kind == "VAR":
            self.lexer.next()
            return "?" + token.text[1:]
        if token.kind in ("IRI", "PNAME"):
            predicate = self.iri("a predicate")
            following = self.lexer.peek()
            signed_number = following.is_punct("+") and self.text[following.end:following.end + 1] in "0123456789."
            if (following.is_punct("/") or following.is_punct("*") or following.is_punct("|")
                    or (following.is_punct("+") and not signed_number)):
                raise self._no_paths(following)
            return predicate
        if token.is_punct("^") or token.is_punct("!") or token.is_punct("("):
            raise self._no_paths(token)
        raise self.expected("a predicate (an IRI, a prefixed name, 'a' or a variable)", token)

    def _no_paths(self, token: _Token) -> QuerySyntaxError:
        return self.error("property paths are not supported by the engine; write one triple pattern per step",
                          token, ("a predicate",))

    def subject_term(self, window: str | None):
        token = self.lexer.peek()
        if token.kind in ("VAR", "IRI", "PNAME", "BNODE", "QOPEN"):
            return self.node(window)
        raise self.expected("a triple pattern", token)

    def object_term(self, window: str | None):
        token = self.lexer.peek()
        if token.is_punct("["):
            return self.blank_node_property_list(window)
        if token.is_punct("("):
            raise self.error("RDF collections are not supported in patterns", token, ("an object",))
        return self.node(window, allow_literal=True, what="an object (an IRI, a literal, a variable or '<<')")

    def blank_node_property_list(self, window: str | None) -> str:
        self.enter(self.expect_punct("["))
        variable = self.fresh_blank()
        if not self.accept_punct("]"):
            self.property_list(variable, window)
            self.expect_punct("]", "']' or ';'")
        self.leave()
        return variable

    def fresh_blank(self) -> str:
        self.anon += 1
        return f"?_:anon{self.anon}"

    def node(self, window: str | None, allow_literal: bool = False, what: str = "a subject"):
        """One RDF term or variable in a pattern (subject, object, or inside << >>)."""
        token = self.lexer.peek()
        kind = token.kind
        if kind == "VAR":
            self.lexer.next()
            return "?" + token.text[1:]
        if kind in ("IRI", "PNAME"):
            return self.iri(what)
        if kind == "BNODE":
            self.lexer.next()
            group = self.blank_node_groups.setdefault(token.text, self.groups[-1])
            if group != self.groups[-1]:
                raise self.error(f"blank node {token.text} is used in two groups; a blank node label belongs "
                                 "to one basic graph pattern (use a variable to join groups)", token,
                                 ("a variable",))
            return "?" + token.text  # ?_:label, a non-distinguished variable
        if kind == "QOPEN":
            return self.quoted(window)
        if token.is_punct("[") and self.peek_anon():
            return self.fresh_blank()
        if allow_literal:
            literal = self.literal(what)
            if literal is not None:
                return literal
        raise self.expected(what, token)

    def peek_anon(self) -> bool:
        """Consume '[ ]' (an anonymous blank node) if that is what comes next."""
        save_pos, save_peek = self.lexer.pos, self.lexer._peeked
        self.lexer.next()
        if self.lexer.peek().is_punct("]"):
            self.lexer.next()
            return True
        self.lexer.pos, self.lexer._peeked = save_pos, save_peek
        return False

    def quoted(self, window: str | None):
        self.enter(self.lexer.next())  # <<
        s = self.node(window, what="the subject of a quoted triple")
        p = self.verb()
        o = self.node(window, allow_literal=True, what="the object of a quoted triple")
        token = self.lexer.peek()
        if token.kind != "QCLOSE":
            raise self.expected("'>>'", token)
        self.lexer.next()
        self.leave()
        if _is_ground(s) and _is_ground(p) and _is_ground(o):
            return make_quoted((s, p, o))
        return TriplePattern(s, p, o, None)

    def iri(self, what: str) -> str:
        token = self.lexer.peek()
        if token.kind == "IRI":
            self.lexer.next()
            return iri_term(self.resolve(self.decoded(token, _decode_uchars), token))
        if token.kind == "PNAME":
            self.lexer.next()
            return self.expand_pname(token)
        raise self.expected(what, token)

    def expand_pname(self, token: _Token) -> str:
        prefix, _, local = token.text.partition(":")
        if prefix not in self.prefixes:
            raise self.error(f"undeclared prefix '{prefix}:'", token, ("a declared prefix",))
        if "\\" in local:
            local = _PN_LOCAL_ESC_RE.sub(r"\1", local)
        return iri_term(self.prefixes[prefix] + local)

    def literal(self, what: str) -> str | None:
        """A literal term, or None when the next token does not start one."""
        token = self.lexer.peek()
        kind = token.kind
        if kind in ("STRING", "LONG"):
            self.lexer.next()
            lexical = self.decoded(token, _unescape_string)
            following = self.lexer.peek()
            if following.kind == "LANGTAG" and following.pos == token.end:
                self.lexer.next()
                return literal_term(lexical, lang=following.text[1:])
            if following.is_punct("^^"):
                self.lexer.next()
                datatype = self.iri("a datatype IRI")
                if _SCHEME_RE.match(datatype, 1):  # an absolute IRI term: the codec's rule, escapes kept
                    return make_literal(lexical, datatype=datatype)
                return literal_term(lexical, datatype=datatype[1:-1])
            return literal_term(lexical)
        if kind in ("INTEGER", "DECIMAL", "DOUBLE"):
            self.lexer.next()
            return self.number(token.text, kind)
        if token.is_punct("+") or token.is_punct("-"):
            save_pos = self.lexer.pos
            self.lexer.next()
            number = self.lexer.peek()
            if number.kind in ("INTEGER", "DECIMAL", "DOUBLE") and number.pos == token.end:
                self.lexer.next()
                return self.number(token.text + number.text, number.kind)
            self.lexer.pos, self.lexer._peeked = save_pos, token
            return None
        if token.is_word("TRUE", "FALSE") and token.text in ("true", "false"):
            self.lexer.next()
            return literal_term(token.text, datatype=XSD_NS + "boolean")
        return None

    @staticmethod
    def number(text: str, kind: str) -> str:
        datatype = {"INTEGER": "integer", "DECIMAL": "decimal", "DOUBLE": "double"}[kind]
        return literal_term(text, datatype=XSD_NS + datatype)

    # ------------------------------------------------------------------ FILTER
    def filter(self) -> None:
        keyword = self.lexer.next()
        start = self.lexer.peek()
        if start.is_word("NOT") and self.absence_filter(start):
            return
        if start.is_word("EXISTS", "NOT"):
            raise self.error("FILTER EXISTS and NOT EXISTS are not supported by the engine", start,
                             ("'(' or a function call",))
        if start.is_punct("("):
            expr = self.bracketted()
        elif start.kind == "NAME" and start.text.upper() in filters.BUILTINS:
            expr = self.primary()
        elif start.kind in ("IRI", "PNAME"):
            expr = self.primary()
        else:
            raise self.expected("'(' or a function call after FILTER", start)
        end = self.lexer.pos if self.lexer._peeked is None else self.lexer._peeked.pos
        text = self.text[start.pos:end].strip()
        try:
            filters.check(expr)
        except filters.FilterCompileError as exc:
            raise self.error(str(exc), keyword, ("a valid FILTER",)) from None
        self.filters.append((expr, text))
        self.filter_groups.append(self.groups[-1])

    def absence_filter(self, start: _Token) -> bool:
        """``FILTER NOT EXISTS { Q } WITHIN D``: the absence of Q after the rest of the query
        (docs/engine.md, "Absence"). False, with nothing consumed, when no such form follows (a
        plain NOT EXISTS is evaluated per window instance)."""
        lexer = self.lexer
        saved = (lexer.pos, lexer._peeked, len(self.patterns), len(self.filters), len(self.filter_groups),
                 self.groups_opened, self.nesting, dict(self.blank_node_groups), self.anon)
        lexer.next()
        if not (lexer.peek().is_word("EXISTS") and lexer.next() and lexer.peek().is_punct("{")):
            self.restore(saved)
            return False
        window = self.current_window
        first = len(self.patterns)
        self.nested_group(window)
        within = self.accept_word("WITHIN")
        if within is None:
            self.restore(saved)
            return False
        if self.absence is not None:
            raise self.error("one FILTER NOT EXISTS ... WITHIN per query", start, ())
        if not any(self.patterns[i].window is not None for i in range(first, len(self.patterns))):
            raise self.error("FILTER NOT EXISTS ... WITHIN needs a triple pattern over a stream inside it", start,
                             ("a WINDOW block",))
        self.absence = (Absence(frozenset(range(first, len(self.patterns))), self.duration()), start)
        return True

    def restore(self, saved: tuple) -> None:
        """Back to where ``absence_filter`` started looking ahead."""
        (self.lexer.pos, self.lexer._peeked, patterns, filters_, filter_groups, self.groups_opened, self.nesting,
         self.blank_node_groups, self.anon) = saved
        del self.patterns[patterns:], self.filters[filters_:], self.filter_groups[filter_groups:]

    def bracketted(self):
        self.enter(self.expect_punct("("))
        expr = self.expression()
        self.expect_punct(")", "')' or an operator")
        self.leave()
        return expr

    def expression(self):
        left = self.and_expression()
        while token := self.accept_punct("||"):
            left = self.built(("or", left, self.and_expression()), token)
        return left

    def and_expression(self):
        left = self.relational()
        while token := self.accept_punct("&&"):
            left = self.built(("and", left, self.relational()), token)
        return left

    def relational(self):
        left = self.additive()
        token = self.lexer.peek()
        if token.kind == "PUNCT" and token.text in ("=", "!=", "<", ">", "<=", ">="):
            self.lexer.next()
            return self.built(("cmp", token.text, left, self.additive()), token)
        if token.is_word("IN"):
            self.lexer.next()
            return self.built(("in", left, self.expression_list(), False), token)
        if token.is_word("NOT"):
            self.lexer.next()
            self.expect_word("IN")
            return self.built(("in", left, self.expression_list(), True), token)
        return left

    def expression_list(self) -> list:
        self.enter(self.expect_punct("("))
        items = []
        if not self.accept_punct(")"):
            while True:
                items.append(self.expression())
                if self.accept_punct(")"):
                    break
                self.expect_punct(",", "',' or ')'")
        self.leave()
        return items

    def additive(self):
        return self.arithmetic(self.multiplicative, "+", "-")

    def multiplicative(self):
        return self.arithmetic(self.unary, "*", "/")

    def arithmetic(self, operand, plus: str, minus: str):
        """A left-associative run of ``operand``s joined by two operators of one precedence."""
        left = operand()
        while True:
            token = self.lexer.peek()
            if token.is_punct(plus) or token.is_punct(minus):
                self.lexer.next()
                left = self.built(("arith", token.text, left, operand()), token)
            else:
                return left

    def unary(self):
        operators = []  # a run of prefix operators, read without recursion
        while True:
            token = self.lexer.peek()
            kind = {"!": "not", "-": "neg", "+": "pos"}.get(token.text) if token.kind == "PUNCT" else None
            if kind is None:
                break
            operators.append((kind, self.lexer.next()))
            if len(operators) > MAX_EXPRESSION_DEPTH:  # refused now: no list of a million tokens first
                raise self.error(f"FILTER expression nested deeper than {MAX_EXPRESSION_DEPTH} operators", token, ())
        expr = self.primary()
        for kind, token in reversed(operators):
            expr = self.built((kind, expr), token)
        return expr

    def primary(self):
        token = self.lexer.peek()
        kind = token.kind
        if token.is_punct("("):
            return self.bracketted()
        if kind == "VAR":
            self.lexer.next()
            return ("var", token.text[1:])
        if kind in ("IRI", "PNAME"):
            iri = self.iri("an IRI")
            if self.lexer.peek().is_punct("("):
                if iri[1:-1] not in filters.CAST_DATATYPES:
                    raise self.error(f"unknown function {iri} (FILTER knows SPARQL's built-in functions and the "
                                     "xsd: casts)", token, ("a known function",))
                args = self.argument_list()
                if len(args) != 1:
                    raise self.error(f"a cast to {iri} takes one argument", token, ("one argument",))
                return self.built(("cast", iri[1:-1], args[0]), token)
            return ("const", iri)
        if kind == "NAME" and token.text.upper() in filters.BUILTINS:
            self.lexer.next()
            name = token.text.upper()
            if name == "BOUND":
                self.expect_punct("(")
                variable = self.lexer.peek()
                if variable.kind != "VAR":
                    raise self.expected("a variable", variable)
                self.lexer.next()
                self.expect_punct(")")
                return self.built(("call", name, [("var", variable.text[1:])]), token)
            if name in filters.INTERVAL_FUNCTIONS:  # getDURATION() and its kin take no argument
                self.expect_punct("(")
                self.expect_punct(")", f"')': {token.text}() takes no argument")
                return ("call", name, [])
            args = self.argument_list()
            call = self.built(("call", name, args), token)
            try:
                filters.check(call)
            except filters.FilterCompileError as exc:
                raise self.error(str(exc), token, ("a valid call",)) from None
            return call
        if kind == "QOPEN":
            term = self.quoted(None)
            if isinstance(term, TriplePattern):
                raise self.error("quoted triples in FILTER must be constant", token, ("a constant",))
            return ("const", term)
        literal = self.literal("an expression")
        if literal is not None:
            return ("const", literal)
        if token.is_word("EXISTS", "NOT"):
            raise self.error("EXISTS and NOT EXISTS are not supported by the engine", token, ("an expression",))
        if kind == "NAME":
            raise self.error(f"unknown function or keyword '{token.text}'", token, ("an expression",))
        raise self.expected("an expression", token)

    def argument_list(self) -> list:
        self.enter(self.expect_punct("("))
        args = [self.expression()]
        while self.accept_punct(","):
            args.append(self.expression())
        self.expect_punct(")", "',' or ')'")
        self.leave()
        return args


def parse_query(text: str, *, default_width_ms: int | None = None) -> Query:
    """Parse one RSP-QL query; raises QuerySyntaxError naming line, column and what was expected.

    ``default_width_ms`` is the width for a C-SPARQL ``FROM STREAM`` without ``[RANGE ...]``.
    """
    if not text.isascii():
        lone = _SURROGATE_RE.search(text)
        if lone is not None:  # text that cannot be written as UTF-8 (the escaped form is refused too)
            line = text.count("\n", 0, lone.start()) + 1
            column = lone.start() - (text.rfind("\n", 0, lone.start()) + 1) + 1
            raise QuerySyntaxError(f"character U+{ord(lone.group()):04X} is a lone UTF-16 surrogate, not a "
                                   "character", line, column, ("a character",))
    return _Parser(text, default_width_ms).query()


class RspqlClauses(NamedTuple):
    """What a query's RSP-QL clauses say, and the SPARQL 1.1 text left when they are taken out.

    ``sparql`` keeps every character position of the original text: the REGISTER and FROM
    clauses become spaces (their line breaks kept) and each ``WINDOW`` keyword becomes
    ``GRAPH `` (as long), so an error a SPARQL parser reports on it names the line and column
    of the text the user wrote."""
    name: str
    stream: str  # RSTREAM, ISTREAM or DSTREAM (QUERY and STREAM, C-SPARQL's, are RSTREAM)
    windows: dict[str, WindowSpec]
    default_window: str | None  # the C-SPARQL window read by patterns outside WINDOW blocks
    sparql: str


def split_rspql(text: str, *, default_width_ms: int | None = None) -> RspqlClauses:
    """The RSP-QL clauses of a query (REGISTER, FROM NAMED WINDOW, FROM STREAM, WINDOW blocks)
    read with this module's parser, and the rest as SPARQL 1.1 for a full SPARQL parser."""
    parser = _Parser(text, default_width_ms)
    lexer = parser.lexer
    blank: list[tuple[int, int]] = []
    parser.prologue()
    name, stream = "query", "RSTREAM"
    register = parser.accept_word("REGISTER")
    if register:
        kind = parser.expect_word("RSTREAM", "ISTREAM", "DSTREAM", "QUERY", "STREAM",
                                  what="RSTREAM, ISTREAM, DSTREAM or QUERY")
        stream = kind.text.upper() if kind.text.upper() in ("ISTREAM", "DSTREAM") else "RSTREAM"
        name = parser.query_name()
        end = parser.expect_word("AS").end
        blank.append((register.pos, end))
        parser.prologue()
    depth = 0
    while True:  # the SELECT clause, up to the dataset clauses or the WHERE clause
        token = lexer.peek()
        if token.kind == "EOF" or (depth == 0 and (token.is_word("FROM", "WHERE") or token.is_punct("{"))):
            break
        depth += token.is_punct("(") - token.is_punct(")")
        lexer.next()
    while lexer.peek().is_word("FROM"):
        start = lexer.peek().pos
        parser.dataset_clause()
        following = lexer.peek()
        blank.append((start, following.pos if following.kind != "EOF" else len(text)))
    parser.finish_default_window()
    windows: list[int] = []
    while True:
        token = lexer.next()
        if token.kind == "EOF":
            break
        if token.is_word("WINDOW"):
            windows.append(token.pos)
            if lexer.peek().kind == "VAR":
                raise parser.error("WINDOW with a variable is not supported; name a declared window",
                                   lexer.peek(), ("a window name",))
    chars = list(text)
    for start, end in blank:
        for i in range(start, end):
            if chars[i] not in "\r\n":
                chars[i] = " "
    for pos in windows:
        chars[pos:pos + 6] = "GRAPH "
    return RspqlClauses(name, stream, dict(parser.windows), parser.default_window, "".join(chars))
