"""The alpha network: intra-pattern tests and alpha memories (Sparkwave 3.2).

Most alpha tests never run as code: the engine dispatches a triple by hash lookup on its
predicate (and on its object for ``rdf:type`` patterns) straight to the memories that
want it (see ``engine.py``). What is left for an ``AlphaShape`` to test is the rest of the
pattern: a constant subject or object, a variable repeated inside the pattern
(``?x ?p ?x``), and quoted-triple (RDF-star) patterns, whose inner terms are matched and
bound here.

An alpha memory holds entries ``(triple, ts, values)``: ``values`` is the sequence the
join nodes read variables from; for a plain pattern it is the triple itself (no copy),
for a quoted-triple pattern it is the tuple of the pattern's variable values. The entry of
an entailed triple has a fourth item, the asserted triple it was entailed from
(``evidence.py``); only those pay for it. Entries are
indexed by the join key of the join nodes that read the memory (a dict of buckets), and
streamed entries are also kept in arrival order in ``expiry`` so that garbage collection
pops exactly what expired and never scans (3.7). Static entries (``ts == -1``) are never
put in ``expiry``.
"""
from __future__ import annotations

from collections import deque
from operator import itemgetter
from typing import Any, Callable, Sequence

from edgewave.shared.ntriples import quoted_parts
from edgewave.shared.vocab import RDF_TYPE

from .query import TriplePattern, is_var

Triple = tuple[str, str, str]
Entry = tuple[Triple, int, Sequence[str]]  # (+ the source Triple, for an entailed triple)


def _flatten(pattern: Any, path: tuple[int, ...], out: list[tuple[tuple[int, ...], Any]]) -> None:
    """List (path, term) for every leaf of a (possibly quoted) pattern."""
    for i, term in enumerate(pattern.terms()):
        if isinstance(term, TriplePattern):
            out.append((path + (i,), "<<>>"))
            _flatten(term, path + (i,), out)
        else:
            out.append((path + (i,), term))


class AlphaShape:
    """What a triple pattern tests beyond its dispatch key, and where its variables are.

    ``variables`` lists the pattern's distinct variables in order of appearance;
    ``positions[i]`` is where variable ``i`` is read from in an entry's values.
    ``match(triple)`` returns those values or None; it is None itself for a pattern with
    nothing left to test whose variables sit directly in the triple (the common case).
    """

    def __init__(self, pattern: TriplePattern) -> None:
        leaves: list[tuple[tuple[int, ...], Any]] = []
        _flatten(pattern, (), leaves)
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
            if term == "<<>>":
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
        # A canonical form (variables renamed by first appearance) identifies equal shapes.
        rename = {v: f"?{i}" for i, v in enumerate(first)}
        self.key = tuple((path, rename.get(term, term)) for path, term in leaves)


def _compile_match(var_paths, equal, constants, quoted, nested):
    """Build the residual test; paths address terms inside quoted triples."""

    def term_at(triple: Triple, path: tuple[int, ...], cache: dict) -> str | None:
        node: Any = triple
        for depth, i in enumerate(path):
            if depth:
                parts = cache.get(path[:depth])
                if parts is None:
                    if not isinstance(node, str) or not node.startswith("<< "):
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
            if term is None or not term.startswith("<< "):
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


def key_reader(positions: tuple[int, ...]) -> Callable[[Sequence[str]], Any] | int | None:
    """How to read a join key from values: None (no join variable), an index, or an itemgetter.

    One join variable gives the bare term as key, several a tuple; both sides of a join use
    the same reader shape, so keys compare equal exactly when the variables agree.
    """
    if not positions:
        return None
    if len(positions) == 1:
        return positions[0]
    return itemgetter(*positions)


def read_key(reader: Any, values: Sequence[str]) -> Any:
    """Apply a key reader (slow path; the join nodes inline this)."""
    if reader is None:
        return None
    if reader.__class__ is int:
        return values[reader]
    return reader(values)


class AlphaMemory:
    """Triples that passed one pattern's tests, in one scope, indexed by one join key.

    ``scope`` is the tuple of stream IRIs the memory listens to, with ``STATIC`` among them
    when it also reads static data (alone, for patterns outside any WINDOW). ``width`` is the widest window of the join nodes reading it: an entry is
    kept while ``ts + width >= now``.
    """

    __slots__ = ("scope", "shape", "key_positions", "key", "index", "expiry", "successors", "width", "match")

    def __init__(self, scope: tuple[str, ...], shape: AlphaShape, key_positions: tuple[int, ...]) -> None:
        self.scope = scope
        self.shape = shape
        self.key_positions = key_positions
        self.key = key_reader(key_positions)
        self.match = shape.match
        self.index: dict[Any, list[Entry]] = {}
        self.expiry: deque[Entry] = deque()
        self.successors: list = []  # join nodes, deepest first (see Network._attach)
        self.width = 0

    def add(self, triple: Triple, ts: int, source: Triple | None = None) -> None:
        """Store a triple that reached this memory and right-activate the join nodes.

        ``source``: the asserted triple ``triple`` was entailed from (None if asserted).
        ``Engine.push`` inlines this for streamed triples; static data and catch-up use it.
        """
        match = self.match
        if match is None:
            values: Sequence[str] = triple
        else:
            values = match(triple)
            if values is None:
                return
        reader = self.key
        if reader is None:
            key = None
        elif reader.__class__ is int:
            key = values[reader]
        else:
            key = reader(values)
        entry = (triple, ts, values) if source is None else (triple, ts, values, source)
        bucket = self.index.get(key)
        if bucket is None:
            self.index[key] = [entry]
        else:
            bucket.append(entry)
        if ts >= 0:
            self.expiry.append(entry)
        for node in self.successors:
            node.right(entry, key)

    def expire(self, now: int) -> int:
        """Drop entries whose time is over (ts + width < now); returns how many."""
        return drop_expired(self.expiry, self.index, self.key, now - self.width, time_at=1, values_at=2)

    def remove_static(self, triple: Triple) -> bool:
        """Remove a static entry (ts -1) for ``triple``; True if it was there."""
        values = triple if self.match is None else self.match(triple)
        if values is None:
            return False
        key = read_key(self.key, values)
        bucket = self.index.get(key)
        if not bucket:
            return False
        for i, entry in enumerate(bucket):
            if entry[1] < 0 and entry[0] == triple:
                del bucket[i]
                if not bucket:
                    del self.index[key]
                return True
        return False

    def __len__(self) -> int:
        return sum(len(b) for b in self.index.values())

    def __repr__(self) -> str:
        return f"AlphaMemory(scope={self.scope!r}, shape={self.shape.key!r}, key={self.key_positions})"


def drop_expired(expiry: deque, index: dict, reader: Any, limit: int, *, time_at: int, values_at: int) -> int:
    """Pop the items older than ``limit`` from an arrival-ordered queue and from the index
    that holds them; returns how many. Shared by alpha memories (entries) and join nodes
    (tokens): ``time_at`` is where an item keeps its time, ``values_at`` the sequence its
    index key is read from. Costs only what expires (3.7): nothing is scanned."""
    dropped = 0
    single = reader.__class__ is int
    popleft = expiry.popleft
    while expiry and expiry[0][time_at] < limit:
        item = popleft()
        key = item[values_at][reader] if single else read_key(reader, item[values_at])
        bucket = index.get(key)
        if bucket is not None:
            if bucket[0] is item:  # items leave in arrival order: almost always first
                if len(bucket) == 1:
                    del index[key]
                else:
                    del bucket[0]
            elif remove_identical(bucket, item) and not bucket:
                del index[key]
        dropped += 1
    return dropped


def remove_identical(bucket: list, item: Any) -> bool:
    """Remove ``item`` (by identity) from a list; it is almost always at the front."""
    if bucket and bucket[0] is item:
        del bucket[0]
        return True
    for i, other in enumerate(bucket):
        if other is item:
            del bucket[i]
            return True
    return False
