"""The compiled form of an RSP-QL pattern: what the parser produces and the network consumes.

Terms are canonical N-Triples strings (see docs/ARCHITECTURE.md); a variable is a
term starting with ``?``. Keeping patterns in this plain form lets the network
builder ignore syntax, and lets tests build queries without the parser.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, Union

Term = str


def is_var(term: Any) -> bool:
    """True for a variable term (``?name``)."""
    return isinstance(term, str) and term[:1] == "?"


@dataclass(frozen=True)
class TriplePattern:
    """One triple pattern; ``window`` is the window name it must match in, None for static data.

    ``s`` and ``o`` may themselves be TriplePatterns (RDF-star quoted-triple patterns);
    their ``window`` is ignored.
    """

    s: Union[Term, "TriplePattern"]
    p: Term
    o: Union[Term, "TriplePattern"]
    window: str | None = None

    def terms(self) -> tuple:
        return (self.s, self.p, self.o)


@dataclass(frozen=True)
class WindowSpec:
    """A named time window over one stream. ``width_ms`` bounds every match's time span.

    ``more_streams`` lists further streams the window also reads: a C-SPARQL query with several
    ``FROM STREAM`` clauses has one default window over all of them (see ``rspql``).
    ``with_static``: the window's patterns also match static triples (timestamp -1, not widening
    the interval). C-SPARQL merges its streams and ``FROM`` graphs into one dataset, and
    Sparkwave keeps static triples in every alpha memory, so the C-SPARQL default window sets
    it; RSP-QL named windows do not (there, static data is matched outside WINDOW blocks).
    """

    name: Term
    stream: Term
    width_ms: int
    step_ms: int | None = None
    more_streams: tuple[Term, ...] = ()
    with_static: bool = False

    def streams(self) -> tuple[Term, ...]:
        """Every stream whose triples this window reads."""
        return (self.stream,) + self.more_streams


class QuerySyntaxError(ValueError):
    """A query that cannot be compiled; ``str()`` reads ``line L, column C: <message>``.

    ``line`` and ``column`` are 1-based; ``expected`` lists what would have been accepted there.
    Semantic errors (an undeclared window or prefix, a SELECT variable not in the pattern) are
    reported the same way, at the offending token.
    """

    def __init__(self, message: str, line: int, column: int, expected: Sequence[str] = ()):
        super().__init__(f"line {line}, column {column}: {message}")
        self.message = message
        self.line = line
        self.column = column
        self.expected = tuple(expected)


@dataclass
class Filter:
    """A FILTER constraint, evaluated as soon as all its variables are bound.

    ``bind(slots)`` returns a predicate over a sequence of terms where ``slots`` maps each
    variable name (without ``?``) to its index in that sequence; an evaluation error makes the
    predicate return False, as in SPARQL. ``interval``: it calls getDURATION(),
    getSTARTTIME() or getENDTIME(), so it is evaluated on complete matches, with the
    interval of its group in the row (``temporal.py``).
    """

    text: str
    variables: frozenset[str]
    bind: Callable[[dict[str, int]], Callable[[Sequence[Term]], bool]]
    interval: bool = False


TEMPORAL_OPERATORS = ("SEQ", "EQUALS", "OPTIONALSEQ", "EQUALSOPTIONAL")
OPTIONAL_OPERATORS = ("OPTIONALSEQ", "EQUALSOPTIONAL")


@dataclass(frozen=True)
class TemporalOperator:
    """One of EP-SPARQL's operators between two group graph patterns (docs/engine.md,
    "Temporal operators"): ``left`` and ``right`` are the indexes, in ``Query.patterns``, of
    the triple patterns of each operand. In ``A SEQ B SEQ C`` the second operator's left
    operand is A and B together. For OPTIONALSEQ and EQUALSOPTIONAL the left operand is the
    optional one."""

    kind: str  # one of TEMPORAL_OPERATORS
    left: frozenset[int]
    right: frozenset[int]

    @property
    def optional(self) -> bool:
        return self.kind in OPTIONAL_OPERATORS


@dataclass(frozen=True)
class Absence:
    """``FILTER NOT EXISTS { Q } WITHIN D`` (docs/engine.md, "Absence"): the query fires when a
    match of its other patterns is followed by no compatible match of Q within ``within_ms``.
    ``patterns``: Q's triple patterns, as indexes into ``Query.patterns``."""

    patterns: frozenset[int]
    within_ms: int


@dataclass
class Query:
    """A registered pattern: its triple patterns grouped by window, filters and projection.

    ``temporal`` holds the query's temporal operators, innermost first; ``filter_groups``
    the triple patterns (indexes) of the group each filter is written in, which is the
    interval ``getDURATION()`` and its kin measure there."""

    name: str
    select: tuple[str, ...]  # variable names without '?'; empty means SELECT *
    windows: dict[str, WindowSpec]
    patterns: tuple[TriplePattern, ...]
    filters: tuple[Filter, ...] = ()
    text: str = ""
    prefixes: dict[str, str] = field(default_factory=dict)
    distinct: bool = False  # SELECT DISTINCT was written (recorded; consumption is the engine's)
    temporal: tuple[TemporalOperator, ...] = ()
    filter_groups: tuple[frozenset[int], ...] = ()
    absence: Absence | None = None
    consumption: str = "unrestricted"  # or "recent", "chronological" (consumption.py)
    # A chained rule (rules.py): the CONSTRUCT template whose triples re-enter the engine on
    # the stream the query's name names; variables named ``?_:...`` are fresh blank nodes.
    construct: tuple[TriplePattern, ...] = ()

    def projection(self) -> list[str]:
        """The variables a match reports: the SELECT list, or for SELECT * every named variable.

        Blank nodes in patterns are non-distinguished variables (``?_:b``) and never reported.
        """
        if self.select:
            return list(self.select)
        return [v for v in self.variables() if not v.startswith("_:")]

    def variables(self) -> list[str]:
        """Variable names in order of first appearance in the patterns."""
        return pattern_variables(self.patterns)


QUOTED = "<<>>"  # pattern_leaves' stand-in for a quoted pattern (no term is spelled so)


def pattern_leaves(pattern: TriplePattern, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Term]]:
    """``(path, term)`` for every term of a pattern, depth first: ``path`` is the position
    of the term, through the quoted patterns it sits in (``(0, 2)``: the object of the
    quoted subject); a quoted pattern itself comes as ``(path, QUOTED)`` before its terms.
    The one walk over a pattern's terms: alpha tests, variable order and node identity
    are all read from it."""
    for i, term in enumerate(pattern.terms()):
        if isinstance(term, TriplePattern):
            yield path + (i,), QUOTED
            yield from pattern_leaves(term, path + (i,))
        else:
            yield path + (i,), term


def pattern_variables(patterns: Iterable[TriplePattern]) -> list[str]:
    """Names (without '?') of the variables triple patterns bind, in order of first appearance."""
    seen: dict[str, None] = {}
    for tp in patterns:
        for _, term in pattern_leaves(tp):
            if is_var(term):
                seen.setdefault(term[1:], None)
    return list(seen)


def parse_query(text: str, **options: Any) -> Query:
    """Parse RSP-QL text (see ``edgewave.agent.engine.rspql``, imported lazily: it imports this)."""
    from .rspql import parse_query as parse

    return parse(text, **options)
