"""The independent reference the engine is compared with: rdflib + owlrl, window by window.

What the engine promises (docs/ARCHITECTURE.md): a match is a combination of
contributing triples, one per triple pattern, each either a streamed triple (or a triple it
entails) with its timestamp or a static triple (or one it entails) with timestamp -1, such
that the bindings satisfy every pattern and FILTER, every pattern's triple comes from a source
that pattern may read (its window's streams; static data for patterns outside WINDOW blocks and
for windows marked ``with_static``), and, when the last triple arrives at ``end``, every
streamed triple is still inside its pattern's window (``end - ts <= width``; for one window
this is ``end - start <= width``). Consumption is unrestricted: each distinct combination is
one match, emitted once.

How the reference computes the same set without sharing any code with the engine:

1. *Window snapshots.* Every combination has a unique last triple (the generated streams use
   distinct timestamps), so it is attributed to exactly one candidate window: the one that
   ends at that triple's arrival ``t``. For each arrival, each window ``w`` of the query sees
   the snapshot ``{streamed triples of w's streams with t - width(w) <= ts <= t}`` (a triple
   pushed with ``stream=None`` is on every stream).
2. *Entailment.* The RDFS closure of schema + snapshot (owlrl's RDFS semantics; owl:inverseOf
   and owl:SymmetricProperty applied here to a fixpoint together with it), restricted to the
   vocabulary the case uses (owlrl also derives axiomatic triples such as
   ``x rdf:type rdfs:Resource`` that the engine legitimately does not produce). Static data is
   closed the same way. Each snapshot is one named graph of an rdflib Dataset. For speed the
   closure of a snapshot is assembled as the union of the closures of schema + each member
   alone (computed once per arrival, and needed anyway for step 4): every rule in play takes
   one instance triple plus schema triples, so the two are equal, and test_reference.py checks
   that equality with owlrl on whole snapshots of random cases.
3. *Query.* The pattern, written independently as SPARQL (``GRAPH <window> { ... }`` per
   window, ``GRAPH <static> { ... }`` for static patterns, the same FILTER text), is run by
   rdflib over that Dataset: the bindings and the FILTER semantics are rdflib's.
4. *Contributing triples.* A solution says *which* triples match, not *which arrivals* they
   come from. RDFS, inverse and symmetric rules each take one instance triple plus schema
   triples, so a triple is in the closure of a snapshot iff it is in the closure of one
   snapshot member: the supports of a pattern's triple are the arrivals in the window whose
   own closure (schema + that one triple, computed once per arrival with owlrl) contains it,
   plus -1 if the pattern may read static data and the static closure contains it. The
   combinations are the product of the supports; the ones containing the arrival at ``t`` are
   the matches attributed to this window. (If some pattern triple had no support, the
   one-premise argument would be wrong for the case: the reference raises instead of guessing.)

Normalised level of comparison: the multiset of ``(bindings, sorted((triple, ts) for every
contributing triple))``. ``triple`` is the pattern's instantiated triple (the engine reports the
entailed triple that reached the alpha memory, which is the same thing). Sorting makes the key
independent of the engine's join order. It is a multiset because unrestricted consumption
counts combinations per pattern position: when two patterns become the same triple pattern
after binding (``?x :p ?y . ?x :p ?z`` with y = z), arrivals A and B give the combinations
(A, B) and (B, A), two matches with the same key; the reference counts its product the same
way, so a combination emitted twice, or one missing, still shows. Matches made of static
triples only have no arrival to be attributed to and are left out on both sides.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

import owlrl
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.namespace import OWL, RDF
from rdflib.plugins.sparql import prepareQuery

from edgewave.shared.ntriples import literal_parts, make_quoted, quoted_parts

Triple = tuple[str, str, str]
MatchKey = tuple[frozenset, tuple]

STATIC_GRAPH = "urn:edgewave:reference:static"
QUOTED_GRAPH = "urn:edgewave:reference:quoted"
QUOTED_S, QUOTED_P, QUOTED_O = (f"urn:edgewave:reference:quoted-{part}" for part in "spo")


def window_graph(index: int) -> str:
    return f"urn:edgewave:reference:window:{index}"


@dataclass(frozen=True)
class RefWindow:
    streams: tuple[str, ...]  # stream IRIs with brackets, as the engine names them
    width_ms: int
    with_static: bool = False


@dataclass
class RefQuery:
    """A conjunctive pattern in reference form: each triple pattern with its window index."""

    patterns: list[tuple[Triple, int | None]]  # None: static data
    windows: list[RefWindow]
    filters: list[str] = field(default_factory=list)  # SPARQL expressions, without FILTER( )

    def variables(self) -> list[str]:
        seen: dict[str, None] = {}

        def visit(term) -> None:
            if isinstance(term, tuple):
                for part in term:
                    visit(part)
            elif term.startswith("?"):
                seen.setdefault(term[1:], None)

        for triple, _ in self.patterns:
            visit(triple)
        return list(seen)

    def sparql(self) -> str:
        """The same pattern as SPARQL 1.1 over the reference Dataset's named graphs.

        rdflib has no SPARQL-star: a quoted-triple pattern becomes a variable for the quoted
        term plus its three parts looked up in the QUOTED_GRAPH (see ``Terms``).
        """
        groups: dict[str, list[str]] = {}
        fresh = iter(range(1_000_000))

        def render(term) -> str:
            if not isinstance(term, tuple):
                return term
            variable = f"?quoted{next(fresh)}"
            s, p, o = (render(part) for part in term)
            groups.setdefault(QUOTED_GRAPH, []).append(
                f"{variable} <{QUOTED_S}> {s} ; <{QUOTED_P}> {p} ; <{QUOTED_O}> {o} .")
            return variable

        for (s, p, o), window in self.patterns:
            name = STATIC_GRAPH if window is None else window_graph(window)
            line = f"{render(s)} {p} {render(o)} ."
            groups.setdefault(name, []).append(line)
        body = "\n".join(f"  GRAPH <{name}> {{ {' '.join(triples)} }}" for name, triples in groups.items())
        filters = "\n".join(f"  FILTER({f})" for f in self.filters)
        if not self.variables():
            filters += "\n  BIND(1 AS ?ground)"  # rdflib returns no row for SELECT * without variables
        return f"SELECT * WHERE {{\n{body}\n{filters}\n}}"


# ----------------------------------------------------------------------------- terms


def to_rdflib(term: str):
    if term.startswith("<"):
        return URIRef(term[1:-1])
    if term.startswith("_:"):
        return BNode(term[2:])
    lexical, datatype, lang = literal_parts(term)
    if lang:
        return Literal(lexical, lang=lang)
    return Literal(lexical, datatype=URIRef(datatype[1:-1]) if datatype else None)


class Terms:
    """Canonical term <-> rdflib node, for the terms a case uses (no lexical normalisation games).

    A quoted triple becomes an opaque IRI node; its parts are recorded so that ``quoted_graph``
    can describe it for the SPARQL rewriting of quoted-triple patterns. Being opaque, it is not
    asserted and nothing is entailed inside it, as RDF-star requires.
    """

    def __init__(self) -> None:
        self.back: dict = {}
        self.quoted: dict = {}

    def node(self, term: str):
        if term.startswith("<<"):
            node = URIRef("urn:edgewave:reference:quoted:" + hashlib.sha1(term.encode()).hexdigest())
            if node not in self.quoted:
                self.quoted[node] = tuple(self.node(part) for part in quoted_parts(term))
        else:
            node = to_rdflib(term)
        self.back.setdefault(node, term)
        return node

    def quoted_graph(self) -> list[tuple]:
        return [(node, URIRef(predicate), part)
                for node, parts in self.quoted.items()
                for predicate, part in zip((QUOTED_S, QUOTED_P, QUOTED_O), parts)]

    def triple(self, triple: Triple):
        return tuple(self.node(t) for t in triple)

    def term(self, node) -> str:
        try:
            return self.back[node]
        except KeyError:
            raise AssertionError(f"reference produced a term the case never used: {node!r}") from None


# ----------------------------------------------------------------------------- entailment


def closure(graph_triples: Iterable[tuple], entailment: bool) -> set[tuple]:
    """RDFS + owl:inverseOf + owl:SymmetricProperty closure of rdflib triples (owlrl + fixpoint)."""
    return set(_closure(frozenset(graph_triples), entailment))


# The same graph's closure is asked for again and again (hypothesis varies a case around the
# same schema, each distinct stream triple is closed with it): owlrl runs once per graph.
@functools.lru_cache(maxsize=20_000)
def _closure(graph_triples: frozenset, entailment: bool) -> frozenset:
    g = Graph()
    for t in graph_triples:
        g.add(t)
    if not entailment:
        return frozenset(g)
    while True:
        owlrl.DeductiveClosure(owlrl.RDFS_Semantics, axiomatic_triples=False, datatype_axioms=False).expand(g)
        added = []
        for p, q in list(g.subject_objects(OWL.inverseOf)):
            for a, b in itertools.chain(((p, q),), ((q, p),)):
                for s, o in list(g.subject_objects(a)):
                    if not isinstance(o, Literal) and (o, b, s) not in g:
                        added.append((o, b, s))
        for p in list(g.subjects(RDF.type, OWL.SymmetricProperty)):
            for s, o in list(g.subject_objects(p)):
                if not isinstance(o, Literal) and (o, p, s) not in g:
                    added.append((o, p, s))
        if not added:
            return frozenset(g)
        for t in added:
            g.add(t)


class Vocabulary:
    """The classes and properties a case uses: what the comparison is restricted to."""

    def __init__(self, classes: Iterable[str], properties: Iterable[str], terms: Terms):
        self.classes = {terms.node(c) for c in classes}
        terms.node(f"<{RDF.type}>")
        self.properties = {terms.node(p) for p in properties}

    def keep(self, triple: tuple) -> bool:
        s, p, o = triple
        if p == RDF.type:
            return o in self.classes
        return p in self.properties


# ----------------------------------------------------------------------------- the reference


# rdflib parses a query per call; hypothesis runs the same query over many streams.
_prepared = functools.lru_cache(maxsize=2_000)(prepareQuery)


def reference_matches(
    query: RefQuery,
    schema: list[Triple],
    static: list[Triple],
    stream: list[tuple[Triple, int, str | None]],
    vocabulary: tuple[Iterable[str], Iterable[str]],
    entailment: bool = True,
    static_removed: tuple[int, list[Triple]] | None = None,
) -> Counter:
    """The engine's expected matches, normalised (see the module docstring).

    ``static_removed=(k, triples)``: those static triples are removed before the k-th arrival
    (0-based, in timestamp order); from then on no match may use them or what only they entail.
    """
    terms = Terms()
    vocab = Vocabulary(*vocabulary, terms)
    schema_nodes = [terms.triple(t) for t in schema]

    def constants(term) -> None:
        if isinstance(term, tuple):
            for part in term:
                constants(part)
        elif not term.startswith("?"):
            terms.node(term)

    for triple, _ in query.patterns:
        constants(triple)

    def restricted_closure(instance: Iterable[tuple]) -> set[tuple]:
        return {t for t in closure(itertools.chain(schema_nodes, instance), entailment) if vocab.keep(t)}

    static_closure = static_before = restricted_closure(terms.triple(t) for t in static)
    removed_at = len(stream) + 1
    static_after = static_before
    if static_removed is not None:
        removed_at, removed = static_removed
        static_after = restricted_closure(terms.triple(t) for t in static if t not in set(removed))
    arrivals = sorted(stream, key=lambda e: e[1])
    timestamps = [ts for _, ts, _ in arrivals]
    assert len(set(timestamps)) == len(timestamps), "the reference needs distinct timestamps"
    entailed_by: dict[int, set[tuple]] = {}  # arrival -> closure of schema + that triple alone
    cache: dict[Triple, set[tuple]] = {}
    for triple, ts, _ in arrivals:
        if triple not in cache:
            cache[triple] = restricted_closure([terms.triple(triple)])
        entailed_by[ts] = cache[triple]

    read_streams = {s for w in query.windows for s in w.streams}
    variables = query.variables()
    prepared = _prepared(query.sparql())
    results: Counter = Counter()
    def could_match(instance: Triple, pattern) -> bool:
        """Whether a triple might instantiate a pattern (over-approximates: quoted parts unchecked)."""
        for term, part in zip(instance, pattern):
            if isinstance(part, tuple):
                if not term.startswith("<<"):
                    return False
            elif not part.startswith("?") and part != term:
                return False
        return True

    for index, (triple, now, stream_name) in enumerate(arrivals):
        static_closure = static_before if index < removed_at else static_after
        if stream_name is not None and stream_name not in read_streams:
            continue
        # A match attributed to this arrival uses a triple it entails for some windowed pattern;
        # when none of them can, the window holds no new match (and rdflib need not run).
        arrived = [tuple(terms.term(x) for x in t) for t in entailed_by[now]]
        if not any(could_match(instance, pattern)
                   for pattern, window in query.patterns
                   if window is not None and (stream_name is None or stream_name in query.windows[window].streams)
                   for instance in arrived):
            continue
        dataset = Dataset()
        in_window: list[list[int]] = []
        for index, window in enumerate(query.windows):
            members = [ts for tr, ts, st in arrivals
                       if (st is None or st in window.streams) and now - window.width_ms <= ts <= now]
            in_window.append(members)
            graph = dataset.graph(URIRef(window_graph(index)))
            for ts in members:  # the snapshot's closure: the union of its members' (step 2)
                for t in entailed_by[ts]:
                    graph.add(t)
            if window.with_static:
                for t in static_closure:
                    graph.add(t)
        static_graph = dataset.graph(URIRef(STATIC_GRAPH))
        for t in static_closure:
            static_graph.add(t)
        quoted_graph = dataset.graph(URIRef(QUOTED_GRAPH))
        for t in terms.quoted_graph():
            quoted_graph.add(t)

        for row in dataset.query(prepared):
            bindings = {}
            for name in variables:
                node = row[name]
                assert node is not None, f"unbound ?{name} in a conjunctive pattern"
                bindings[name] = terms.term(node)
            choices = []
            def instantiate(term) -> str:
                if isinstance(term, tuple):
                    return make_quoted(tuple(instantiate(part) for part in term))
                return bindings[term[1:]] if term.startswith("?") else term

            for (s, p, o), window in query.patterns:
                instance = (instantiate(s), p if not p.startswith("?") else bindings[p[1:]], instantiate(o))
                node = terms.triple(instance)
                support: list[int] = []
                if window is not None:
                    support = [ts for ts in in_window[window] if node in entailed_by[ts]]
                if (window is None or query.windows[window].with_static) and node in static_closure:
                    support.append(-1)
                assert support, f"no single arrival entails {instance}: the one-premise argument fails"
                choices.append([(instance, ts) for ts in support])
            key_bindings = frozenset(bindings.items())
            for combination in itertools.product(*choices):
                if any(ts == now for _, ts in combination):
                    results[(key_bindings, tuple(sorted(combination)))] += 1
    return results


def engine_key(match) -> MatchKey | None:
    """The normalised form of an engine Match (None for a static-only match)."""
    if all(ts == -1 for _, ts in match.triples):
        return None
    return frozenset(match.bindings.items()), tuple(sorted(match.triples))
