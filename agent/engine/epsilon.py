"""The epsilon-network: schema entailment in front of the alpha network (Sparkwave 3.3-3.4).

The schema (RDFS ``subClassOf``, ``subPropertyOf``, ``domain``, ``range`` plus
``owl:inverseOf`` and ``owl:SymmetricProperty``) is fixed while triples stream, so every
runtime entailment is a consequence of a single data triple: rules rdfs2, rdfs3, rdfs7,
rdfs9, inv2 and sym. The network is therefore stateless across triples.

Building it follows the paper:

1. The schema closure is computed first (rdfs5, rdfs11, inv1: transitive hierarchies,
   inverse pairs both ways), so chains through classes or properties the patterns never
   name (a property whose domain is a *subclass* of a pattern class) are not lost.
2. The schema is reduced to what the patterns can use (3.4): a class node exists for a
   class only if it is a pattern class or one of its (transitive) subclasses; a property
   node exists only if some entailment from it reaches a pattern property or class.
3. Hierarchies are flattened: every link points directly at a class or property that a
   pattern uses (``c subClassOf d subClassOf e`` with only ``e`` in a pattern gives the
   single S-link ``c -> e``). One hop through the network yields every entailed triple.

Links, as in the paper: an S-link types the subject (rdfs2, rdfs9), an O-link types the
object (rdfs3), an SO-link copies subject and object under another property (rdfs7), an
OS-link copies them swapped (inv2, sym). Because links are flattened and deduplicated per
node, each entailed triple is produced once per input triple even when two paths entail
it; the only remaining coincidence (subject equal to object, where an SO- and an OS-link
or an S- and an O-link give the same triple) is resolved by a second, deduplicated link
list used for such self-loop triples.

Entailed triples whose subject would be a literal (an O- or OS-link applied to a literal
object) are not produced: RDF has no literal subjects. Statements about ``rdf:type``
itself (a domain for ``rdf:type``, a sub-property of it) are ignored.

The engine compiles the links into its alpha dispatch tables (see ``engine.py``); this
module knows nothing about memories.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from edgewave.shared.ntriples import Triple, is_literal
from edgewave.shared.vocab import (
    OWL_INVERSEOF,
    OWL_SYMMETRIC,
    RDF_TYPE,
    RDFS_DOMAIN,
    RDFS_RANGE,
    RDFS_SUBCLASSOF,
    RDFS_SUBPROPERTYOF,
)


# How an entailed triple is made from the input triple (s, p, o).
SAME = 0  # the input triple itself
SO = 1  # (s, q, o): rdfs7
OS = 2  # (o, q, s): inv2, sym
S = 3  # (s, rdf:type, c): rdfs2, rdfs9
O = 4  # (o, rdf:type, c): rdfs3

FORM_NAMES = {SAME: "same", SO: "SO", OS: "OS", S: "S", O: "O"}


class Link(NamedTuple):
    """One flattened link: ``form`` (SO, OS, S or O) and its target property or class."""

    form: int
    target: str


@dataclass
class Schema:
    """The T-box of a schema, closed under rdfs5, rdfs11 and inv1 lazily (see ``ancestors``)."""

    sub_class: dict[str, set[str]] = field(default_factory=dict)
    sub_property: dict[str, set[str]] = field(default_factory=dict)
    domain: dict[str, set[str]] = field(default_factory=dict)
    range: dict[str, set[str]] = field(default_factory=dict)
    inverse: dict[str, set[str]] = field(default_factory=dict)
    symmetric: set[str] = field(default_factory=set)
    # ``inverse`` holds both directions (inv1); the statements as written are kept so that
    # an explanation (``evidence.py``) quotes the schema's own ``p owl:inverseOf q``.
    inverse_stated: set[tuple[str, str]] = field(default_factory=set)
    # Axiom chains found for Match.entailed (evidence.py), kept with the schema they hold for.
    chains: dict[tuple, tuple[Triple, ...] | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_triples(cls, triples: Iterable[Triple]) -> "Schema":
        """Read the schema statements edgewave understands; other triples are ignored."""
        schema = cls()
        for s, p, o in triples:
            if p == RDFS_SUBCLASSOF:
                if s != o:
                    schema.sub_class.setdefault(s, set()).add(o)
            elif p == RDFS_SUBPROPERTYOF:
                if s != o and s != RDF_TYPE:
                    schema.sub_property.setdefault(s, set()).add(o)
            elif p == RDFS_DOMAIN:
                if s != RDF_TYPE:
                    schema.domain.setdefault(s, set()).add(o)
            elif p == RDFS_RANGE:
                if s != RDF_TYPE:
                    schema.range.setdefault(s, set()).add(o)
            elif p == OWL_INVERSEOF:
                if RDF_TYPE not in (s, o):
                    schema.inverse.setdefault(s, set()).add(o)
                    schema.inverse.setdefault(o, set()).add(s)  # inv1
                    schema.inverse_stated.add((s, o))
            elif p == RDF_TYPE and o == OWL_SYMMETRIC:
                if s != RDF_TYPE:
                    schema.symmetric.add(s)
        return schema

    def classes(self) -> set[str]:
        found = set(self.sub_class)
        for supers in self.sub_class.values():
            found |= supers
        for table in (self.domain, self.range):
            for classes in table.values():
                found |= classes
        return found

    def properties(self) -> set[str]:
        found = set(self.sub_property) | set(self.domain) | set(self.range)
        found |= set(self.inverse) | self.symmetric
        for supers in self.sub_property.values():
            found |= supers
        return found

    def subclasses(self) -> dict[str, list[str]]:
        """Direct subclass edges, reversed (class -> its direct subclasses, each once)."""
        down: dict[str, list[str]] = {}
        for c, supers in self.sub_class.items():
            for d in supers:
                subs = down.get(d)
                if subs is None:
                    down[d] = [c]
                else:
                    subs.append(c)
        return down


@dataclass
class ClassNode:
    """A class node ``<? rdf:type c>`` with its flattened S-links to pattern classes."""

    cls: str
    s_links: tuple[str, ...] = ()


@dataclass
class PropertyNode:
    """A property node ``<? p ?>`` with its flattened links."""

    prop: str
    so_links: tuple[str, ...] = ()  # sub-property chains (rdfs7)
    os_links: tuple[str, ...] = ()  # inverse / symmetric (inv2, sym), possibly via sub-properties
    s_links: tuple[str, ...] = ()  # classes the subject gets (rdfs2, rdfs9; or rdfs3 when swapped)
    o_links: tuple[str, ...] = ()  # classes the object gets (rdfs3, rdfs9; or rdfs2 when swapped)

    def links(self) -> list[Link]:
        return (
            [Link(SO, q) for q in self.so_links]
            + [Link(OS, q) for q in self.os_links]
            + [Link(S, c) for c in self.s_links]
            + [Link(O, c) for c in self.o_links]
        )


class EpsilonNetwork:
    """The reduced, flattened epsilon-network for one schema and one set of patterns.

    ``pattern_classes``/``pattern_properties`` are the constant classes (objects of
    ``rdf:type`` patterns) and predicates the patterns use; ``all_classes`` /
    ``all_properties`` are set when a pattern has a variable there (then every class or
    property is relevant, as SPARQL over the closure would see them all).
    """

    def __init__(
        self,
        schema: Schema,
        pattern_classes: Iterable[str],
        pattern_properties: Iterable[str],
        all_classes: bool = False,
        all_properties: bool = False,
    ) -> None:
        self.schema = schema
        self.all_classes = all_classes
        self.all_properties = all_properties
        self.pattern_classes = frozenset(pattern_classes)
        self.pattern_properties = frozenset(pattern_properties) - {RDF_TYPE}
        self.class_nodes: dict[str, ClassNode] = {}
        self.property_nodes: dict[str, PropertyNode] = {}
        self._ancestors: dict[str, frozenset[str]] = {}
        self._build()

    # -- closure ---------------------------------------------------------------------------

    def ancestors(self, cls: str) -> frozenset[str]:
        """``cls`` and all its superclasses (rdfs9 + rdfs11), cycles allowed."""
        found = self._ancestors.get(cls)
        if found is None:
            seen = {cls}
            todo = [cls]
            sub_class = self.schema.sub_class
            while todo:
                for d in sub_class.get(todo.pop(), ()):
                    if d not in seen:
                        seen.add(d)
                        todo.append(d)
            found = self._ancestors[cls] = frozenset(seen)
        return found

    def property_states(self, prop: str) -> set[tuple[str, bool]]:
        """Every (property, swapped) a triple with predicate ``prop`` entails (rdfs7, inv2, sym)."""
        schema = self.schema
        seen = {(prop, False)}
        todo = deque(seen)
        while todo:
            q, swapped = todo.popleft()
            nexts = [(r, swapped) for r in schema.sub_property.get(q, ())]
            nexts += [(r, not swapped) for r in schema.inverse.get(q, ())]
            if q in schema.symmetric:
                nexts.append((q, not swapped))
            for state in nexts:
                if state not in seen:
                    seen.add(state)
                    todo.append(state)
        return seen

    # -- reduction and flattening ----------------------------------------------------------

    def _class_targets(self, cls: str) -> set[str]:
        ancestors = self.ancestors(cls)
        if self.all_classes:
            return set(ancestors)
        return set(ancestors & self.pattern_classes)

    def _build(self) -> None:
        schema = self.schema
        if self.all_classes:
            candidates: Iterable[str] = schema.classes()
        else:
            # Relevant classes: the pattern classes and their transitive subclasses (3.4).
            down = schema.subclasses()
            relevant = set()
            todo = [c for c in self.pattern_classes]
            while todo:
                c = todo.pop()
                if c in relevant:
                    continue
                relevant.add(c)
                todo.extend(down.get(c, ()))
            candidates = relevant
        for c in candidates:
            targets = self._class_targets(c) - {c}
            if targets or c in self.pattern_classes or self.all_classes:
                self.class_nodes[c] = ClassNode(c, tuple(sorted(targets)))

        for p in schema.properties():
            node = self._property_node(p)
            if node is not None:
                self.property_nodes[p] = node

    def _property_node(self, p: str) -> PropertyNode | None:
        schema = self.schema
        wanted = self.pattern_properties
        so, os_ = set(), set()
        subject_classes, object_classes = set(), set()
        for q, swapped in self.property_states(p):
            if self.all_properties or q in wanted:
                if swapped:
                    os_.add(q)
                elif q != p:
                    so.add(q)
            for c in schema.domain.get(q, ()):
                (object_classes if swapped else subject_classes).add(c)
            for c in schema.range.get(q, ()):
                (subject_classes if swapped else object_classes).add(c)
        s_links = set()
        for c in subject_classes:
            s_links |= self._class_targets(c)
        o_links = set()
        for c in object_classes:
            o_links |= self._class_targets(c)
        if not (so or os_ or s_links or o_links):
            return None
        return PropertyNode(p, tuple(sorted(so)), tuple(sorted(os_)), tuple(sorted(s_links)), tuple(sorted(o_links)))

    # -- what the engine compiles ----------------------------------------------------------

    def links_for_predicate(self, p: str, self_loop: bool = False) -> list[Link]:
        """The flattened links of the property node for ``p`` (empty if it has none).

        With ``self_loop`` (subject equal to object) the links are deduplicated on the
        triple they produce: an OS-link equal to an SO-link (or to the input itself) and an
        O-link equal to an S-link are dropped.
        """
        node = self.property_nodes.get(p)
        if node is None:
            return []
        links = node.links()
        if not self_loop:
            return links
        so_targets = set(node.so_links) | {p}
        s_targets = set(node.s_links)
        return [
            link
            for link in links
            if not (link.form == OS and link.target in so_targets)
            and not (link.form == O and link.target in s_targets)
        ]

    def links_for_class(self, cls: str) -> list[Link]:
        """The S-links of the class node for ``cls`` (the superclasses patterns use)."""
        node = self.class_nodes.get(cls)
        return [Link(S, d) for d in node.s_links] if node is not None else []

    def entail(self, triple: Triple) -> list[Triple]:
        """The triples entailed by one triple (the input excluded); the reference slow path."""
        s, p, o = triple
        if p == RDF_TYPE:
            links = self.links_for_class(o)
        else:
            links = self.links_for_predicate(p, self_loop=(s == o))
        out = []
        for form, target in links:
            derived = derive(triple, form, target)
            if derived is not None and derived != triple:
                out.append(derived)
        return out

    def size(self) -> dict[str, int]:
        """Node and link counts, for stats and for checking that reduction happened."""
        links = {"S": 0, "O": 0, "SO": 0, "OS": 0}
        for node in self.class_nodes.values():
            links["S"] += len(node.s_links)
        for pnode in self.property_nodes.values():
            links["S"] += len(pnode.s_links)
            links["O"] += len(pnode.o_links)
            links["SO"] += len(pnode.so_links)
            links["OS"] += len(pnode.os_links)
        return {
            "class_nodes": len(self.class_nodes),
            "property_nodes": len(self.property_nodes),
            **{f"{k}_links": v for k, v in links.items()},
        }


def derive(triple: Triple, form: int, target: str) -> Triple | None:
    """Apply one link to a triple; None where the result would have a literal subject."""
    s, p, o = triple
    if form == SAME:
        return triple
    if form == SO:
        return (s, target, o)
    if form == S:
        return (s, RDF_TYPE, target)
    if is_literal(o):
        return None
    if form == OS:
        return (o, target, s)
    return (o, RDF_TYPE, target)
