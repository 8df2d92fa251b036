"""SPARQL expressions of a query's algebra (algebra.py) as the expression trees ``filters`` compiles.

rdflib parses the query; evaluation stays edgewave's own (``filters``: closures over rows of
canonical N-Triples terms, no rdflib objects per solution). A function the engine does not
evaluate is refused here, by name, when the query is registered.
"""
from __future__ import annotations

from typing import Any

from ....shared.ntriples import make_literal
from ..rspql import iri_term
from .. import filters
from ..filters import Expr
from .algebra import Blank, Iri, Lit, Op, Unsupported, Var

XSD = "http://www.w3.org/2001/XMLSchema#"


class UnsupportedQuery(ValueError):
    """A construct the per-instance evaluator does not implement; the message names it."""


def term(node: Any) -> str:
    """An algebra's term as a canonical N-Triples term; a blank node in a pattern is a variable."""
    if isinstance(node, Iri):
        return iri_term(str(node))  # a relative IRI (a window named <w1>) kept as written
    if isinstance(node, Lit):
        return make_literal(str(node), datatype=node.datatype, lang=node.language)
    if isinstance(node, Var):
        return "?" + str(node)
    if isinstance(node, Blank):
        return "?_:" + str(node)
    kind = str(node) if isinstance(node, Unsupported) else type(node).__name__
    raise UnsupportedQuery(f"{kind} terms are not supported")


# Builtins whose argument names (rdflib's), in order, are the function's arguments.
_ARGUMENTS = {
    "REGEX": ("text", "pattern", "flags"), "IF": ("arg1", "arg2", "arg3"),
    "sameTerm": ("arg1", "arg2"), "LANGMATCHES": ("arg1", "arg2"), "CONTAINS": ("arg1", "arg2"),
    "STRSTARTS": ("arg1", "arg2"), "STRENDS": ("arg1", "arg2"),
}
_LIST_ARGUMENT = ("COALESCE", "CONCAT")
_RELATIONAL = ("=", "!=", "<", ">", "<=", ">=")


def expression(node: Any) -> Expr:
    """The expression tree for an algebra's expression node."""
    if isinstance(node, Var):
        return ("var", str(node))
    if isinstance(node, (Iri, Lit)):
        return ("const", term(node))
    if not isinstance(node, Op):
        raise UnsupportedQuery(f"expression {node!r} is not supported")
    name = node.name
    if name in ("ConditionalOrExpression", "ConditionalAndExpression"):
        op = "or" if name == "ConditionalOrExpression" else "and"
        result = expression(node.expr)
        for other in node.other or ():
            result = (op, result, expression(other))
        return result
    if name == "RelationalExpression":
        left = expression(node.expr)
        if node.op in ("IN", "NOT IN"):
            return ("in", left, [expression(item) for item in node.other], node.op == "NOT IN")
        if node.op not in _RELATIONAL:
            raise UnsupportedQuery(f"operator {node.op} is not supported")
        return ("cmp", node.op, left, expression(node.other))
    if name in ("AdditiveExpression", "MultiplicativeExpression"):
        result = expression(node.expr)
        for op, other in zip(node.op or (), node.other or ()):
            result = ("arith", op, result, expression(other))
        return result
    if name == "UnaryNot":
        return ("not", expression(node.expr))
    if name == "UnaryMinus":
        return ("neg", expression(node.expr))
    if name == "UnaryPlus":
        return ("pos", expression(node.expr))
    if name == "Function":
        iri = str(node.iri)
        args = [expression(arg) for arg in node.expr or ()]
        if iri.startswith(XSD) and len(args) == 1 and iri in filters.CAST_DATATYPES:
            return ("cast", iri, args[0])
        raise UnsupportedQuery(f"function <{iri}> is not supported")
    if name in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
        raise UnsupportedQuery("EXISTS inside an expression is not supported; write FILTER EXISTS { ... } "
                               "or FILTER NOT EXISTS { ... } on its own or joined with &&")
    if name.startswith("Builtin_"):
        return _builtin(name[len("Builtin_"):], node)
    raise UnsupportedQuery(f"{name} is not supported")


def _builtin(function: str, node: Op) -> Expr:
    upper = function.upper()
    if upper not in filters.BUILTINS:
        raise UnsupportedQuery(f"function {upper} is not supported")
    if function in _ARGUMENTS:
        args = [node.get(key) for key in _ARGUMENTS[function]]
        args = [a for a in args if a is not None]
    elif upper in _LIST_ARGUMENT:
        args = list(node.arg or ())
    else:
        args = [node.arg]
    if upper == "BOUND" and not isinstance(args[0], Var):
        raise UnsupportedQuery("BOUND takes a variable")
    tree = ("call", upper, [expression(arg) for arg in args])
    try:
        filters.check(tree)
    except filters.FilterCompileError as exc:
        raise UnsupportedQuery(str(exc)) from None
    return tree


def text_of(expr: Expr) -> str:
    """An expression tree written back as SPARQL (for FILTER texts and ``--explain``)."""
    kind = expr[0]
    if kind == "var":
        return "?" + expr[1]
    if kind == "const":
        return expr[1]
    if kind in ("or", "and"):
        return f"({text_of(expr[1])} {'||' if kind == 'or' else '&&'} {text_of(expr[2])})"
    if kind == "not":
        return f"!{text_of(expr[1])}"
    if kind in ("cmp", "arith"):
        return f"({text_of(expr[2])} {expr[1]} {text_of(expr[3])})" if kind == "arith" else \
            f"{text_of(expr[2])} {expr[1]} {text_of(expr[3])}"
    if kind in ("neg", "pos"):
        return ("-" if kind == "neg" else "+") + text_of(expr[1])
    if kind == "call":
        return f"{expr[1]}({', '.join(text_of(a) for a in expr[2])})"
    if kind == "cast":
        return f"<{expr[1]}>({text_of(expr[2])})"
    if kind == "in":
        return f"{text_of(expr[1])} {'NOT IN' if expr[3] else 'IN'} ({', '.join(text_of(i) for i in expr[2])})"
    return str(expr)
