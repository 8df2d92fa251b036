"""A per-instance query's text: RSP-QL clauses read by ``rspql``, the SPARQL 1.1 rest parsed
by rdflib and compiled here.

Why rdflib for the SPARQL part: its parser and algebra translation (SPARQL 1.1 section 18)
already get the scoping of FILTER, BIND and OPTIONAL, the translation of aggregates and
HAVING, and VALUES right, and the W3C tests hold them to it; growing the hand-written
parser to all of SPARQL 1.1 would repeat that work. The window clauses stay ours (rdflib
knows no RSP-QL), and so does evaluation: rdflib only parses, once, when a query is
registered, and the compiler reads a plain copy of its algebra (algebra.py), so a process
that is handed the algebra compiles without rdflib. The plainest queries (a basic graph
pattern under a SELECT of variables and aggregates, direct.py) are read to the same
algebra without importing rdflib at all.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ..query import QuerySyntaxError, WindowSpec
from ..rspql import RspqlClauses, split_rspql
from .algebra import Op, from_rdflib

if TYPE_CHECKING:
    from .compiler import Network

__all__ = ["InstanceQuery", "parse_instance_query", "parse_for_evaluation", "sparql_algebra"]


class InstanceQuery(NamedTuple):
    name: str
    stream: str  # RSTREAM, ISTREAM or DSTREAM
    windows: dict[str, WindowSpec]
    text: str
    clauses: RspqlClauses
    algebra: Op  # the SPARQL part's algebra (algebra.py), parsed once (compiling reads it, never changes it)

    def compile(self) -> "Network":
        """A fresh network for this query (each evaluator holds its own state)."""
        from .compiler import Compiler
        from .expressions import UnsupportedQuery

        try:
            return Compiler(self.windows, self.clauses.default_window).query(self.algebra)
        except UnsupportedQuery as exc:
            raise _located(str(exc), self.text) from None


def sparql_algebra(sparql: str) -> Op:
    """The algebra of a query's SPARQL part (rdflib parses and translates it), as plain values.

    Raises QuerySyntaxError where rdflib refuses the text. The plainest queries (a basic
    graph pattern under variables and aggregates, ``direct.py``) are read without rdflib,
    to the same algebra: importing rdflib's parser costs more than the rest of a short run."""
    from .direct import plain_algebra

    plain = plain_algebra(sparql)
    return plain if plain is not None else rdflib_algebra(sparql)


def rdflib_algebra(sparql: str) -> Op:
    """``sparql_algebra`` by rdflib, whatever the query."""
    from rdflib.plugins.sparql.algebra import translateQuery
    from rdflib.plugins.sparql.parser import parseQuery
    from pyparsing import ParseException

    from ....shared.rdflib_literals import literals_as_written

    with literals_as_written():
        try:
            parsed = parseQuery(sparql)
        except ParseException as exc:
            found = exc.line[exc.col - 1:exc.col + 19].split()[0] if exc.line[exc.col - 1:].strip() else "end of query"
            raise QuerySyntaxError(f"SPARQL syntax error near '{found}'", exc.lineno, exc.col,
                                   ("a SPARQL 1.1 query",)) from None
        try:
            algebra = translateQuery(parsed).algebra
        except Exception as exc:  # rdflib's translation refuses some queries (e.g. an ungrouped variable)
            raise QuerySyntaxError(f"{exc}", 1, 1, ()) from None
    return from_rdflib(algebra)


def _located(message: str, text: str) -> QuerySyntaxError:
    """An unsupported construct's error, at the first place in the text that writes it."""
    words = {"subqueries": r"\{\s*SELECT\b", "WINDOW (or GRAPH)": r"\bWINDOW\s+\?", "EXISTS": r"\bEXISTS\b",
             "VALUES": r"\bVALUES\b", "property paths": r"[/|^*+]\s*[<:?a-zA-Z]", "aggregate": r"\b[A-Z_]+\s*\(",
             "function": r"\b[A-Za-z_:]+\s*\(", "BIND": r"\bBIND\b", "window": r"\bWINDOW\b"}
    position = 0
    body = text.find("{")  # constructs are written in the WHERE clause, after the prologue's IRIs
    for word, pattern in words.items():
        if word in message:
            found = re.compile(pattern, re.I).search(text, max(body, 0))
            if found:
                position = found.start()
                break
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return QuerySyntaxError(message, line, column, ())


AlgebraOf = Callable[[str], Op]


def parse_instance_query(text: str, *, default_width_ms: Optional[int] = None,
                         algebra_of: Optional[AlgebraOf] = None) -> InstanceQuery:
    """Parse and check a per-instance query; raises QuerySyntaxError with line and column.

    ``algebra_of`` gives the algebra of the query's SPARQL part (default: ``sparql_algebra``,
    rdflib in this process); a gateway passes what its document reader parsed."""
    clauses = split_rspql(text, default_width_ms=default_width_ms)
    if not clauses.windows:
        raise QuerySyntaxError("a per-instance query reads at least one window (FROM NAMED WINDOW or "
                               "FROM STREAM ... [RANGE ...])", 1, 1, ("FROM",))
    algebra = (algebra_of or sparql_algebra)(clauses.sparql)  # rdflib only for a per-instance query
    query = InstanceQuery(clauses.name, clauses.stream, clauses.windows, text, clauses, algebra)
    query.compile()  # every error now, not at the first instance
    return query


def parse_for_evaluation(text: str, *, per_instance: bool = False, default_width_ms: Optional[int] = None,
                         algebra_of: Optional[AlgebraOf] = None):
    """The query for the mode it needs: a conjunctive pattern (``rspql.parse_query``'s Query)
    keeps continuous matching; a query that needs a window's content as a whole (aggregates,
    OPTIONAL, negation, UNION, BIND, VALUES, expressions in SELECT, solution modifiers, or
    REGISTER ISTREAM/DSTREAM) is evaluated per instance, as is every query when
    ``per_instance`` is asked for. A query neither accepts raises the error of the
    evaluator that says most: per-instance for a construct continuous matching does not
    support, the pattern parser's for anything else. ``algebra_of``: as for ``parse_instance_query``."""
    from ..rspql import parse_query

    if per_instance:
        return parse_instance_query(text, default_width_ms=default_width_ms, algebra_of=algebra_of)
    try:
        query = parse_query(text, default_width_ms=default_width_ms)
    except QuerySyntaxError as refused:
        if "not supported" not in str(refused):
            raise
        return parse_instance_query(text, default_width_ms=default_width_ms, algebra_of=algebra_of)
    if split_rspql(text, default_width_ms=default_width_ms).stream in ("ISTREAM", "DSTREAM"):
        return parse_instance_query(text, default_width_ms=default_width_ms, algebra_of=algebra_of)
    return query


def describe_instance_query(query: InstanceQuery) -> str:
    """What ``edgewave match --explain`` prints for a per-instance query."""
    lines = [f"per-instance query {query.name} ({query.stream})"]
    for name, spec in query.windows.items():
        streams = " ".join(spec.streams())
        lines.append(f"  window {name}: RANGE {spec.width_ms} ms STEP {spec.step_ms or spec.width_ms} ms on {streams}"
                     + (", with the static data" if spec.with_static else ""))
    lines += query.compile().describe()
    return "\n".join(lines) + "\n"
