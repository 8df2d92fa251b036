"""The algebra of the plainest SPARQL queries, read without rdflib.

Importing rdflib's SPARQL parser and translating one query costs a quarter of a second of
CPU, more than reading 100,000 stream lines; for a query that is a basic graph pattern
(in the default graph or in GRAPH blocks) under a SELECT of variables and aggregates,
with GROUP BY variables, that work is not needed. ``plain_algebra`` reads such a query
and returns the algebra rdflib's translation gives for it (SPARQL 1.1 section 18, in
``algebra.py``'s plain values: the same operators, arguments and order, the
``__agg_N__`` numbering and the ``SAMPLE`` rdflib adds for a grouped variable in SELECT),
only without the ``_vars`` annotations, which the compiler never reads. For anything
else, including every error, it returns None and rdflib parses the query as before:
this reader never refuses a query and never words an error.

Read here (case-insensitive keywords, ASCII text only): ``PREFIX`` declarations;
``SELECT [DISTINCT]`` of variables and ``(AGG(...) AS ?v)`` with AGG one of COUNT, SUM,
AVG, MIN, MAX, SAMPLE, GROUP_CONCAT (no SEPARATOR), ``COUNT(*)``, ``DISTINCT`` inside,
the argument a variable, ``STR(...)`` or a function named by an IRI with one argument;
``[WHERE] { ... }`` holding triple patterns (variables, absolute IRIs, prefixed names,
``a``, with ``;`` and ``,``) and ``GRAPH <iri> { triple patterns }`` blocks; ``GROUP BY``
variables. ``tests/unit/test_per_instance_direct.py`` holds the results to rdflib's.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from .algebra import Iri, Op, Var

__all__ = ["plain_algebra"]

_RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<iri><[^<>"{}|^`\\\x00-\x20]*>)
    | (?P<pname>(?:[A-Za-z](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?)?:(?:[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?)?)
    | (?P<var>[?$][A-Za-z0-9_]+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[{}().;,*])
    | (?P<comment>\#[^\n]*)
    )""",
    re.VERBOSE,
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_AGGREGATES = {"COUNT": "Aggregate_Count", "SUM": "Aggregate_Sum", "AVG": "Aggregate_Avg", "MIN": "Aggregate_Min",
               "MAX": "Aggregate_Max", "SAMPLE": "Aggregate_Sample", "GROUP_CONCAT": "Aggregate_GroupConcat"}


def _term_key(term: Any) -> tuple[int, str]:
    """Where rdflib's term order puts a term: variables before IRIs, then by the string."""
    return (20 if isinstance(term, Var) else 30, str(term))


def _reordered(triples: list[list[Any]]) -> list[list[Any]]:
    """rdflib's ``reorderTriples``, which its translation applies to every basic graph
    pattern: the patterns with the fewest unknown variables first, those whose variables
    occur most often among them next, each block making its variables known to the rest."""
    counts: dict[str, int] = {}
    for triple in triples:
        for term in triple:
            if isinstance(term, Var):
                counts[term] = counts.get(term, 0) + 1
    known: set[str] = set()

    def key(triple: list[Any]) -> tuple:
        unknown = sum(1 for t in triple if isinstance(t, Var) and t not in known)
        return (unknown, -sum(counts.get(t, 0) for t in triple), True), tuple(_term_key(t) for t in triple)

    keyed = [(None, triple) for triple in triples]  # (its key as last sorted, the triple)
    i = 0
    while i < len(keyed):
        keyed[i:] = sorted(((key(triple), triple) for _, triple in keyed[i:]), key=lambda item: item[0])
        first = keyed[i][0][0][0]
        j = 0  # the block sorted first with as many unknowns: its variables become known
        while i + j < len(keyed) and keyed[i + j][0][0][0] == first:
            known.update(t for t in keyed[i + j][1] if isinstance(t, Var))
            j += 1
        i += 1
    return [triple for _, triple in keyed]


class _NotPlain(Exception):
    """The query is not one this reader takes: rdflib reads it."""


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip():
                raise _NotPlain
            break
        pos = m.end()
        kind = m.lastgroup
        if kind is None:  # only white space was left
            break
        if kind != "comment":
            out.append((kind, m.group(kind)))
    return out


class _Reader:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.prefixes: dict[str, str] = {}

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end":
            raise _NotPlain
        self.at += 1
        return token

    def word(self, *words: str) -> Optional[str]:
        """The next token if it is one of ``words`` (keywords, any case), taken; else None."""
        kind, text = self.peek()
        if kind == "word" and text.upper() in words:
            self.at += 1
            return text.upper()
        return None

    def punct(self, char: str) -> bool:
        if self.peek() == ("punct", char):
            self.at += 1
            return True
        return False

    def expect(self, char: str) -> None:
        if not self.punct(char):
            raise _NotPlain

    def iri(self, kind: str, text: str) -> Iri:
        if kind == "iri":
            body = text[1:-1]
        elif kind == "pname":
            prefix, _, local = text.partition(":")
            if prefix not in self.prefixes:
                raise _NotPlain
            body = self.prefixes[prefix] + local
        else:
            raise _NotPlain
        if not _SCHEME.match(body):
            raise _NotPlain  # relative: rdflib decides what it resolves against
        return Iri(body)

    def term(self, predicate: bool = False) -> Any:
        kind, text = self.take()
        if kind == "var":
            return Var(text[1:])
        if predicate and kind == "word" and text == "a":
            return Iri(_RDF_TYPE)
        return self.iri(kind, text)

    # ------------------------------------------------------------------ query
    def query(self) -> Op:
        while self.word("PREFIX"):
            kind, text = self.take()
            if kind != "pname" or not text.endswith(":"):
                raise _NotPlain
            target = self.take()
            if target[0] != "iri":
                raise _NotPlain
            self.prefixes[text[:-1]] = self.iri(*target)
        if not self.word("SELECT"):
            raise _NotPlain
        distinct = self.word("DISTINCT") is not None
        projection: list[tuple[Var, Any]] = []  # (variable, None) or (variable, aggregate)
        while True:
            kind, text = self.peek()
            if kind == "var":
                self.at += 1
                projection.append((Var(text[1:]), None))
            elif self.punct("("):
                aggregate = self.aggregate()
                if not self.word("AS"):
                    raise _NotPlain
                kind, text = self.take()
                if kind != "var":
                    raise _NotPlain
                self.expect(")")
                projection.append((Var(text[1:]), aggregate))
            else:
                break
        if not projection:
            raise _NotPlain  # SELECT * lists its variables in a set's order
        self.word("WHERE")
        where, mentioned = self.group()
        group_by: Optional[list[Var]] = None
        if self.word("GROUP"):
            if not self.word("BY"):
                raise _NotPlain
            group_by = []
            while self.peek()[0] == "var":
                group_by.append(Var(self.take()[1][1:]))
            if not group_by:
                raise _NotPlain
        if self.peek()[0] != "end":
            raise _NotPlain
        return self.translate(distinct, projection, where, mentioned, group_by)

    def aggregate(self) -> Op:
        name = self.word(*_AGGREGATES)
        if name is None:
            raise _NotPlain
        self.expect("(")
        distinct = "DISTINCT" if self.word("DISTINCT") else []
        if name == "COUNT" and self.punct("*"):
            argument: Any = "*"
        else:
            argument = self.expression()
        self.expect(")")
        return Op(_AGGREGATES[name], distinct=distinct, vars=argument)

    def expression(self) -> Any:
        kind, text = self.take()
        if kind == "var":
            return Var(text[1:])
        if kind == "word" and text.upper() == "STR":
            self.expect("(")
            argument = self.expression()
            self.expect(")")
            return Op("Builtin_STR", arg=argument)
        if kind in ("iri", "pname"):
            function = self.iri(kind, text)
            self.expect("(")
            argument = self.expression()
            self.expect(")")
            return Op("Function", iri=function, distinct=[], expr=[argument])
        raise _NotPlain

    def group(self) -> tuple[Op, set[str]]:
        """``{ ... }``: rdflib's translation of its parts (adjacent triples one BGP, joined
        left to right with the GRAPH blocks), and the variables it mentions."""
        self.expect("{")
        parts: list[Op] = []
        mentioned: set[str] = set()
        while not self.punct("}"):
            if self.word("GRAPH"):
                name = self.iri(*self.take())
                self.expect("{")
                triples = self.triples(mentioned)
                self.expect("}")
                if not triples:
                    raise _NotPlain
                parts.append(Op("Graph", term=name, p=Op("BGP", triples=triples)))
                self.punct(".")
                continue
            triples = self.triples(mentioned)
            if not triples:
                raise _NotPlain
            if parts and parts[-1].name == "BGP":
                parts[-1]["triples"] += triples
            else:
                parts.append(Op("BGP", triples=triples))
        if not parts:
            raise _NotPlain
        for part in parts:
            bgp = part if part.name == "BGP" else part["p"]
            bgp["triples"] = _reordered(bgp["triples"])
        where = parts[0]
        for part in parts[1:]:
            # rdflib's ``analyse``: a join is lazy when no join lies below it
            where = Op("Join", p1=where, p2=part, lazy=where.name != "Join")
        return where, mentioned

    def triples(self, mentioned: set[str]) -> list[list[Any]]:
        """Triple patterns up to a ``}`` or a GRAPH block (the '.' between them taken)."""
        out: list[list[Any]] = []
        while self.peek() != ("punct", "}") and not (self.peek()[0] == "word" and self.peek()[1].upper() == "GRAPH"):
            subject = self.term()
            while True:
                predicate = self.term(predicate=True)
                while True:
                    obj = self.term()
                    out.append([subject, predicate, obj])
                    if not self.punct(","):
                        break
                if not self.punct(";"):
                    break
                if self.peek() in (("punct", "."), ("punct", "}")):
                    break  # a trailing ';'
            if not self.punct("."):
                if self.peek() != ("punct", "}") and not (self.peek()[0] == "word"
                                                          and self.peek()[1].upper() == "GRAPH"):
                    raise _NotPlain
        for triple in out:
            mentioned.update(str(t) for t in triple if isinstance(t, Var))
        return out

    # ------------------------------------------------------------------ translation
    def translate(self, distinct: bool, projection: list[tuple[Var, Any]], where: Op, mentioned: set[str],
                  group_by: Optional[list[Var]]) -> Op:
        """rdflib's ``translate`` (algebra.py there), for what ``query`` read."""
        names = [v for v, _ in projection]
        if len(set(names)) != len(names):
            raise _NotPlain
        if any(aggregate is not None and v in mentioned for v, aggregate in projection):
            raise _NotPlain  # an AS variable already bound: rdflib's to refuse or not
        aggregated = group_by is not None or any(aggregate is not None for _, aggregate in projection)
        if group_by is not None and len(set(group_by)) != len(group_by):
            raise _NotPlain
        node = where
        if aggregated:
            grouped = set(group_by or ())
            if any(aggregate is None and v not in grouped for v, aggregate in projection):
                raise _NotPlain  # an ungrouped variable: rdflib refuses it
            node = Op("Group", p=node, expr=list(group_by) if group_by is not None else None)
            found: list[Op] = []
            extends: list[tuple[Var, Var]] = []
            for v, aggregate in projection:
                if aggregate is not None:
                    found.append(aggregate)
                    aggregate["res"] = Var(f"__agg_{len(found)}__")
            for v, aggregate in projection:
                if aggregate is None:
                    res = Var(f"__agg_{len(found) + 1}__")
                    found.append(Op("Aggregate_Sample", vars=v, res=res))
                    extends.append((res, v))
            node = Op("AggregateJoin", A=found, p=node)
            for res, v in extends:
                node = Op("Extend", p=node, expr=res, var=v)
            for v, aggregate in projection:
                if aggregate is not None:
                    node = Op("Extend", p=node, expr=aggregate["res"], var=v)
        pv = list(names)
        node = Op("Project", p=node, PV=pv)
        if distinct:
            node = Op("Distinct", p=node)
        return Op("SelectQuery", p=node, datasetClause=None, PV=list(pv))


def plain_algebra(sparql: str) -> Optional[Op]:
    """The algebra of ``sparql`` (a query's SPARQL part, RSP-QL clauses taken out) as
    rdflib's translation gives it, less ``_vars``; None if the query is not one read here."""
    if not sparql.isascii() or '"' in sparql or "'" in sparql:
        return None
    try:
        return _Reader(_tokens(sparql)).query()
    except _NotPlain:
        return None
