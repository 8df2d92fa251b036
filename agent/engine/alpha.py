"""The alpha network: what a triple pattern tests (Doorenbos 2.2, Sparkwave 3.2).

Most alpha tests never run as code: the engine dispatches a triple by hash lookup on its
predicate (and on its object for ``rdf:type`` patterns) straight to the memories that
want it (see ``engine.py``). What is left for an ``AlphaShape`` to test is the rest of the
pattern: a constant subject or object, a variable repeated inside the pattern
(``?x ?p ?x``), and quoted-triple (RDF-star) patterns, whose inner terms are matched and
bound here. The alpha memories the tests lead to are in ``memories.py``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from edgewave.shared.ntriples import is_quoted, quoted_parts
from edgewave.shared.vocab import RDF_TYPE

from .query import QUOTED, TriplePattern, is_var, pattern_leaves
from .tokens import Triple


class AlphaShape:
    """What a triple pattern tests beyond its dispatch lookup, and where its variables are.

    ``variables`` lists the pattern's distinct variables in order of appearance;
    ``positions[i]`` is where variable ``i`` is read from in an entry's values.
    ``match(triple)`` returns those values or None; it is None itself for a pattern with
    nothing left to test whose variables sit directly in the triple (the common case).
    """

    def __init__(self, pattern: TriplePattern) -> None:
        leaves = list(pattern_leaves(pattern))
        self.predicate = pattern.p if not is_var(pattern.p) else None
        self.is_type = self.predicate == RDF_TYPE
        self.type_class = None
        if self.is_type and not isinstance(pattern.o, TriplePattern) and not is_var(pattern.o):
            self.type_class = pattern.o
        first: dict[str, tuple[int, ...]] = {}
        equal: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        constants: list[tuple[tuple[int, ...], str]] = []
        quoted: list[tuple[int, ...]] = []
        for path, term in leaves:
            if term == QUOTED:
                quoted.append(path)
            elif is_var(term):
                if term in first:
                    equal.append((first[term], path))
                else:
                    first[term] = path
            elif path == (1,) or (path == (2,) and self.type_class is not None):
                continue  # tested by the dispatch lookup
            else:
                constants.append((path, term))
        self.variables: tuple[str, ...] = tuple(first)
        nested = bool(quoted)
        self.plain = not nested and not equal and not constants
        if not nested:
            self.positions: tuple[int, ...] = tuple(p[0] for p in first.values())
        else:
            self.positions = tuple(range(len(first)))
        self.match: Callable[[Triple], Sequence[str] | None] | None = None
        if not self.plain:
            self.match = _compile_match(tuple(first.values()), equal, constants, quoted, nested)
        # Variables renamed by first appearance: equal for patterns that test the same, so
        # that they can share an alpha memory.
        rename = {v: f"?{i}" for i, v in enumerate(first)}
        self.canonical = tuple((path, rename.get(term, term)) for path, term in leaves)


def _compile_match(var_paths, equal, constants, quoted, nested):
    """Build the residual test; paths address terms inside quoted triples."""

    def term_at(triple: Triple, path: tuple[int, ...], cache: dict) -> str | None:
        node: Any = triple
        for depth, i in enumerate(path):
            if depth:
                parts = cache.get(path[:depth])
                if parts is None:
                    if not isinstance(node, str) or not is_quoted(node):
                        return None
                    try:
                        parts = quoted_parts(node)
                    except ValueError:
                        return None
                    cache[path[:depth]] = parts
                node = parts
            node = node[i]
        return node

    quoted = sorted(quoted, key=len)

    def match(triple: Triple):
        cache: dict = {}
        for path in quoted:
            term = term_at(triple, path, cache)
            if term is None or not is_quoted(term):
                return None
            try:
                cache[path] = quoted_parts(term)
            except ValueError:
                return None
        for path, const in constants:
            if term_at(triple, path, cache) != const:
                return None
        for a, b in equal:
            if term_at(triple, a, cache) != term_at(triple, b, cache):
                return None
        if nested:
            return tuple(term_at(triple, p, cache) for p in var_paths)
        return triple

    return match
