"""Why a match fired: which contributing triples were entailed, from what, by which axioms.

The epsilon-network is flattened (``epsilon.py``): one hop from an input triple to every
triple it entails, so where ``Engine.push`` makes an entailed triple it knows its source,
and keeps it on the alpha entry: an entailed entry is ``(triple, ts, values, source)``, an
asserted one stays ``(triple, ts, values)`` (see ``Engine.push_many`` for the measured
cost). Static triples entailed from static data keep their source the same way.

What the flattening collapsed, the schema statements that justify one hop (``acme:locatedIn
rdfs:range acme:Space``, ``acme:Space rdfs:subClassOf ex:Room``), is recovered here, when a
match is asked (``Match.entailed``): a breadth-first search over the schema from the
source's predicate (or class) to the entailed triple's property (or class). Matches are
rare next to triples, so this work belongs at emission and never on the hot path; the
chains are cached per (predicate or class, form, target), which is all they depend on.

The chain reported is a shortest one, ties broken in a fixed order (sub-properties, inverses,
symmetry, domains, ranges, each sorted by term), so the same schema always gives the same chain.
"""
from __future__ import annotations

from collections import deque
from typing import Mapping, NamedTuple

from edgewave.shared.ntriples import Triple
from edgewave.shared.vocab import (
    OWL_INVERSEOF,
    OWL_SYMMETRIC,
    RDF_TYPE,
    RDFS_DOMAIN,
    RDFS_RANGE,
    RDFS_SUBCLASSOF,
    RDFS_SUBPROPERTYOF,
)

from .epsilon import Schema

Node = tuple  # ("p", property, swapped) or ("c", class)

# Chains are cached on the Schema (``Schema.chains``); a bound so a schema of thousands of
# classes with a variable class pattern cannot grow the cache without end.
MAX_CACHED_CHAINS = 4096


class Entailment(NamedTuple):
    """One contributing triple that the epsilon-network entailed.

    ``source`` is the asserted triple (pushed, or static) it was entailed from; ``form`` and
    ``target`` the flattened link (``S``/``O`` type the subject/object with class ``target``,
    ``SO``/``OS`` copy subject and object, swapped for ``OS``, under property ``target``);
    ``axioms`` the schema statements that make the link, in the order they apply from
    ``source`` to ``triple``. ``axioms`` is empty only when the schema was replaced after the
    triple was entailed and no longer entails it.
    """

    triple: Triple
    ts: int
    source: Triple
    form: str
    target: str
    axioms: tuple[Triple, ...]


def candidate_forms(source: Triple, derived: Triple) -> list[str]:
    """The link forms that could turn ``source`` into ``derived``, by where the terms sit.

    Two only when subject equals object; then in the order ``EpsilonNetwork`` keeps for a
    self-loop triple (SO before OS, S before O)."""
    s, p, o = source
    ds, dp, do = derived
    forms = []
    if dp == RDF_TYPE:
        if p == RDF_TYPE:
            return ["S"] if ds == s else []  # a class node's S-link (rdfs9)
        if ds == s:
            forms.append("S")
        if ds == o:
            forms.append("O")
    else:
        if ds == s and do == o:
            forms.append("SO")
        if ds == o and do == s:
            forms.append("OS")
    return forms


class Explainer:
    """Explains entailed alpha entries against one schema (made by ``Match.entailed``).

    ``static`` is the engine's own mapping of static triples (live, not a copy): a static
    entry keeps the first static triple that entailed it, which may since have been
    removed while another one still entails it.
    """

    __slots__ = ("schema", "static", "_chains")

    def __init__(self, schema: Schema, static: Mapping[Triple, object]) -> None:
        self.schema = schema
        self.static = static
        self._chains = schema.chains

    def explain(self, triple: Triple, ts: int, source: Triple) -> Entailment | None:
        """The evidence for one entailed entry (``triple`` at ``ts``, entailed from ``source``);
        None for a static entry whose triple is itself static now (asserted, so not marked)."""
        if ts < 0 and triple in self.static:
            return None
        if ts < 0 and source not in self.static:
            for other in self.static:
                if candidate_forms(other, triple):
                    found = self._explain(triple, ts, other)
                    if found.axioms:
                        return found
        return self._explain(triple, ts, source)

    def _explain(self, triple: Triple, ts: int, source: Triple) -> Entailment:
        forms = candidate_forms(source, triple)
        _, p, o = triple
        for form in forms:
            target = o if form in ("S", "O") else p
            axioms = self.chain(source, form, target)
            if axioms is not None:
                return Entailment(triple, ts, source, form, target, axioms)
        form = forms[0] if forms else ""
        target = o if form in ("S", "O") else p
        return Entailment(triple, ts, source, form, target, ())

    def chain(self, source: Triple, form: str, target: str) -> tuple[Triple, ...] | None:
        """The schema statements of a shortest path for one link from ``source``; None if none."""
        _, p, o = source
        if p == RDF_TYPE:
            link: tuple = ("c", o, target)
            start: Node = ("c", o)
        else:
            link = ("p", p, form, target)
            start = ("p", p, False)
        chains = self._chains
        if link in chains:
            return chains[link]
        if form == "SO":
            goal: Node = ("p", target, False)
        elif form == "OS":
            goal = ("p", target, True)
        else:
            goal = ("c", target)
        found = self._search(start, goal, form)
        if len(chains) >= MAX_CACHED_CHAINS:
            chains.clear()
        chains[link] = found
        return found

    def _search(self, start: Node, goal: Node, form: str) -> tuple[Triple, ...] | None:
        """Breadth-first over properties (with a swapped flag) and classes (``epsilon.py``'s
        closure, walked edge by edge so that each edge is a schema statement)."""
        parents: dict[Node, tuple[Node, Triple] | None] = {start: None}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if node == goal and node != start:
                break
            for nxt, axiom in self._neighbours(node, form):
                if nxt not in parents:
                    parents[nxt] = (node, axiom)
                    queue.append(nxt)
        else:
            return None
        axioms = []
        step = parents[goal]
        while step is not None:
            node, axiom = step
            axioms.append(axiom)
            step = parents[node]
        axioms.reverse()
        return tuple(axioms)

    def _neighbours(self, node: Node, form: str) -> list[tuple[Node, Triple]]:
        schema = self.schema
        if node[0] == "c":
            c = node[1]
            return [(("c", d), (c, RDFS_SUBCLASSOF, d)) for d in sorted(schema.sub_class.get(c, ()))]
        _, q, swapped = node
        out: list[tuple[Node, Triple]] = []
        for r in sorted(schema.sub_property.get(q, ())):  # rdfs7
            out.append((("p", r, swapped), (q, RDFS_SUBPROPERTYOF, r)))
        for r in sorted(schema.inverse.get(q, ())):  # inv2, as written in the schema
            axiom = (q, OWL_INVERSEOF, r) if (q, r) in schema.inverse_stated else (r, OWL_INVERSEOF, q)
            out.append((("p", r, not swapped), axiom))
        if q in schema.symmetric:
            out.append((("p", q, not swapped), (q, RDF_TYPE, OWL_SYMMETRIC)))
        if form in ("S", "O"):
            # Which of domain/range types the node the link types: the subject for S, the
            # object for O, each swapped once more by an odd number of inverse/symmetric steps.
            subject = (form == "S") != swapped
            for c in sorted(schema.domain.get(q, ()) if subject else ()):  # rdfs2
                out.append((("c", c), (q, RDFS_DOMAIN, c)))
            for c in sorted(schema.range.get(q, ()) if not subject else ()):  # rdfs3
                out.append((("c", c), (q, RDFS_RANGE, c)))
        return out
