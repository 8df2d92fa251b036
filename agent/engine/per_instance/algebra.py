"""A per-instance query's SPARQL algebra as plain Python values, and as JSON.

rdflib parses a query's SPARQL part once (front.py); the compiler reads the algebra that
comes out. Reading rdflib's own objects would tie every process that compiles a query to
rdflib and its parser (about 15 MB of resident memory on a gateway whose whole budget is
40 MB), so the algebra is copied once into the small types below, which also travel as
JSON: a gateway has its config documents read by a short-lived child process
(``edgewave.agent.document_reader``) and compiles their queries from what it sends back.

The copy keeps rdflib's operator names and argument names (SPARQL 1.1 section 18:
``Join`` with ``p1``/``p2``, ``Extend`` with ``p``/``var``/``expr``, ...), so the compiler
reads as rdflib's documentation describes the algebra. One difference on purpose: an
argument an operator does not have reads as None, by attribute and by ``get`` alike
(rdflib's ``CompValue.get`` answers the key's own name for a missing key).
"""
from __future__ import annotations

from typing import Any


class Op(dict):
    """An algebra operator: its name and its arguments (a missing argument reads as None)."""

    __slots__ = ("name",)

    def __init__(self, name: str, **args: Any) -> None:
        super().__init__(args)
        self.name = name

    def __getattr__(self, key: str) -> Any:
        return self.get(key)

    def __repr__(self) -> str:
        return f"{self.name}{dict.__repr__(self)}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Op) and self.name == other.name and dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


class Var(str):
    """A variable, by its name without ``?``."""


class Iri(str):
    """An IRI, as written (no angle brackets; a relative one such as a window ``<w1>`` kept so)."""


class Blank(str):
    """A blank node label (in a pattern, a variable no solution shows)."""


class Unsupported(str):
    """What the compiler refuses wherever it meets it (a property path), by rdflib's type name."""


class Lit(str):
    """A literal: the string is its lexical form, as the query wrote it."""

    def __new__(cls, lexical: str, datatype: str | None = None, language: str | None = None) -> "Lit":
        literal = super().__new__(cls, lexical)
        literal.datatype = datatype
        literal.language = language
        return literal

    def __repr__(self) -> str:
        return f"Lit({str(self)!r}, {self.datatype!r}, {self.language!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Lit) and str(self) == str(other) and self.datatype == other.datatype
                and self.language == other.language)

    __hash__ = str.__hash__


# Instance attributes of rdflib's CompValue that are not arguments of the operator.
_RDFLIB_BOOKKEEPING = frozenset({"name", "_evalfn", "translated", "ctx"})


def from_rdflib(node: Any) -> Any:
    """rdflib's algebra (CompValue trees of rdflib terms, lists, sets, dicts) as plain values."""
    from pyparsing import ParseResults
    from rdflib import BNode, Literal, URIRef, Variable
    from rdflib.plugins.sparql.parserutils import CompValue

    def copy(value: Any) -> Any:
        if isinstance(value, CompValue):
            args = {key: dict.__getitem__(value, key) for key in value}
            # rdflib sets some arguments as attributes after parsing (an EXISTS' translated
            # ``graph``); as attributes they hide the item of the same name, so they win here too.
            args.update((key, item) for key, item in vars(value).items() if key not in _RDFLIB_BOOKKEEPING)
            return Op(value.name, **{key: copy(item) for key, item in args.items()})
        if isinstance(value, Variable):
            return Var(value)
        if isinstance(value, URIRef):
            return Iri(value)
        if isinstance(value, Literal):
            datatype = str(value.datatype) if value.datatype is not None else None
            return Lit(str(value), datatype, value.language)
        if isinstance(value, BNode):
            return Blank(value)
        if isinstance(value, (list, tuple, ParseResults)):
            return [copy(item) for item in value]
        if isinstance(value, (set, frozenset)):
            return frozenset(copy(item) for item in value)
        if isinstance(value, dict):
            return {copy(key): copy(item) for key, item in value.items()}
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        return Unsupported(type(value).__name__)

    return copy(node)


def to_json(node: Any) -> Any:
    """A plain algebra as JSON values (each kind of value tagged, so it reads back the same)."""
    if isinstance(node, Op):
        return {"op": node.name, "args": {key: to_json(value) for key, value in node.items()}}
    if isinstance(node, Var):
        return {"var": str(node)}
    if isinstance(node, Iri):
        return {"iri": str(node)}
    if isinstance(node, Lit):
        return {"lit": str(node), "datatype": node.datatype, "language": node.language}
    if isinstance(node, Blank):
        return {"blank": str(node)}
    if isinstance(node, Unsupported):
        return {"unsupported": str(node)}
    if isinstance(node, list):
        return [to_json(item) for item in node]
    if isinstance(node, frozenset):
        return {"set": [to_json(item) for item in node]}
    if isinstance(node, dict):
        return {"map": [[to_json(key), to_json(value)] for key, value in node.items()]}
    return node


def from_json(data: Any) -> Any:
    """What ``to_json`` wrote, as the plain algebra again; raises ValueError on anything else."""
    if isinstance(data, list):
        return [from_json(item) for item in data]
    if not isinstance(data, dict):
        if data is None or isinstance(data, (str, int, float, bool)):
            return data
        raise ValueError(f"unexpected {type(data).__name__} in an algebra")
    if "op" in data:
        return Op(data["op"], **{key: from_json(value) for key, value in data["args"].items()})
    if "var" in data:
        return Var(data["var"])
    if "iri" in data:
        return Iri(data["iri"])
    if "lit" in data:
        return Lit(data["lit"], data["datatype"], data["language"])
    if "blank" in data:
        return Blank(data["blank"])
    if "unsupported" in data:
        return Unsupported(data["unsupported"])
    if "set" in data:
        return frozenset(from_json(item) for item in data["set"])
    if "map" in data:
        return {from_json(key): from_json(value) for key, value in data["map"]}
    raise ValueError(f"unknown algebra value {sorted(data)}")
