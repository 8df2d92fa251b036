"""The Rete network's structure: compiling a query into a join chain, sharing, removal.

A query becomes a left-deep chain of join nodes, one per triple pattern, ending in a
production. The order of the chain: the written order, except that a pattern sharing a
variable with what is already joined goes before one that shares none (so no cross
product is made while a join is possible). Keeping the written order otherwise is what
lets patterns with a common prefix share nodes.

Sharing: a join node is identified by its parent, its triple pattern with variables
renamed by slot (so ``?o a :Offer`` and ``?x a :Offer`` are the same first node), its
scope (the stream, or static data), its FILTERs, and, for chains mixing several windows,
the window widths level by level. Window widths of single-window chains are *not* part of
the identity: windows live in the tokens (3.5), a shared node keeps tokens for the widest
window and each child checks its own.

Scopes: a triple pattern inside ``WINDOW <w> { }`` listens to the stream(s) of ``<w>``; a
pattern outside every WINDOW matches static data only (the RSP-QL reading: the default
graph). Streamed triples never match static patterns, and static triples match windowed
ones only in a window marked ``with_static`` (the C-SPARQL default window, where streams
and ``FROM`` graphs form one dataset, as in Sparkwave).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .alpha import AlphaShape
from .beta import BetaNode, JoinNode, Production, StarJoinNode
from .match import Match
from .memories import AlphaMemory
from .query import Filter, Query, TriplePattern, WindowSpec, is_var, pattern_leaves, pattern_variables

STATIC = "#static"  # static data in a scope (not an IRI, so no clash with a stream)


def stream_key(stream: str) -> str:
    """Streams are named by IRI; accept ``<iri>`` and ``iri`` alike."""
    if stream.startswith("<") and stream.endswith(">"):
        return stream[1:-1]
    return stream


def order_patterns(patterns: tuple[TriplePattern, ...]) -> list[TriplePattern]:
    """Written order, but connected patterns before unconnected ones."""
    remaining = list(patterns)
    ordered: list[TriplePattern] = []
    bound: set[str] = set()
    while remaining:
        pick = remaining[0]
        if ordered:
            for tp in remaining:
                if bound.intersection(pattern_variables((tp,))):
                    pick = tp
                    break
        remaining.remove(pick)
        ordered.append(pick)
        bound.update(pattern_variables((pick,)))
    return ordered


def _canonical(pattern: TriplePattern, slots: dict[str, int]) -> tuple:
    """The pattern with its variables renamed by row slot: equal for the levels of two
    queries that bind the same slots alike."""
    return tuple((path, f"?{slots[t]}" if is_var(t) else t) for path, t in pattern_leaves(pattern))


def alpha_ident(scope: tuple[str, ...], shape: AlphaShape, key_positions: tuple[int, ...]) -> tuple:
    """What identifies an alpha memory: patterns testing the same in one scope, indexed alike."""
    return (scope, shape.canonical, key_positions)


def _name(var: str) -> str:
    return var[1:] if var.startswith("?") else var


@dataclass
class Step:
    """One level of a compiled chain (before nodes exist)."""

    pattern: TriplePattern
    shape: AlphaShape
    scope: tuple[str, ...]  # the stream IRIs it reads, and/or STATIC
    width: int | None  # the window width of this level, None for static data
    key_positions: tuple[int, ...]
    row_slots: tuple[int, ...]
    new_positions: tuple[int, ...]
    filters: list[Filter]
    slots: dict[str, int]  # variable (without '?') -> slot, after this level
    ident_part: tuple
    uniform: bool
    user_width: int  # uniform: the prefix's window width; layered: the widest window so far
    prefix_width: int  # layered: the uniform parent's window width


@dataclass
class Chain:
    """What the network keeps for one registered query."""

    query: Query
    nodes: list[BetaNode]
    production: Production
    steps: list[Step] = field(default_factory=list)


def compile_steps(query: Query) -> list[Step]:
    """Order the patterns, assign slots, place filters, and describe each level."""
    steps: list[Step] = []
    slots: dict[str, int] = {}  # '?var' -> slot
    placed: set[int] = set()
    windows_seen: list[str] = []
    window_levels: list[tuple] = []
    ordered = order_patterns(query.patterns)
    if not ordered:
        raise ValueError(f"query {query.name!r} has no triple patterns")
    for level, tp in enumerate(ordered):
        shape = AlphaShape(tp)
        window: WindowSpec | None = None
        if tp.window is not None:
            window = query.windows.get(tp.window)
            if window is None:
                raise ValueError(f"query {query.name!r}: pattern uses undeclared window {tp.window}")
        variables = shape.variables
        join = sorted((v for v in variables if v in slots), key=slots.__getitem__)
        new = [v for v in variables if v not in slots]
        key_positions = tuple(shape.positions[variables.index(v)] for v in join)
        row_slots = tuple(slots[v] for v in join)
        new_positions = tuple(shape.positions[variables.index(v)] for v in new)
        for v in new:
            slots[v] = len(slots)
        bound = {_name(v) for v in slots}
        filters = []
        last = level == len(ordered) - 1
        for i, f in enumerate(query.filters):
            if i not in placed and ({_name(v) for v in f.variables} <= bound or last):
                placed.add(i)
                filters.append(f)
        if window is not None:
            if window.name not in windows_seen:
                windows_seen.append(window.name)
            window_levels.append((windows_seen.index(window.name), window.width_ms))
        else:
            window_levels.append((None, None))
        uniform = len(windows_seen) <= 1
        widths = [w for _, w in window_levels if w is not None]
        prefix_width = steps[-1].user_width if steps and steps[-1].uniform else 0
        name_slots = {_name(v): s for v, s in slots.items()}
        filter_ident = tuple(
            (f.text, tuple(sorted((_name(v), name_slots.get(_name(v))) for v in f.variables))) for f in filters
        )
        if window is not None:
            scope: tuple[str, ...] = tuple(sorted({stream_key(x) for x in window.streams()}))
            if window.with_static:
                scope += (STATIC,)  # a C-SPARQL default window: streams and FROM graphs together
        else:
            scope = (STATIC,)
        window_part: tuple = ("uniform",) if uniform else ("layered", tuple(window_levels))
        ident_part = (_canonical(tp, slots), scope, filter_ident, window_part)
        steps.append(
            Step(
                pattern=tp,
                shape=shape,
                scope=scope,
                width=window.width_ms if window is not None else None,
                key_positions=key_positions,
                row_slots=row_slots,
                new_positions=new_positions,
                filters=filters,
                slots=name_slots,
                ident_part=ident_part,
                uniform=uniform,
                user_width=max(widths) if widths else 0,
                prefix_width=prefix_width,
            )
        )
    return steps


class Network:
    """Alpha memories and join nodes of every registered query, shared where possible."""

    def __init__(self, deliver: Callable[[Match], None], clock: Callable[[], int]) -> None:
        self.deliver = deliver
        self.clock = clock
        self.alphas: dict[tuple, AlphaMemory] = {}
        self.nodes: dict[tuple, BetaNode] = {}
        self.chains: dict[str, Chain] = {}

    # -- building -----------------------------------------------------------------------

    def _alpha(self, step: Step, created: list[AlphaMemory], root: bool) -> AlphaMemory:
        # A root's memory is indexed by its first variable, the star variable when the
        # next patterns join on it (see StarJoinNode).
        positions = step.new_positions[:1] if root else step.key_positions
        ident = alpha_ident(step.scope, step.shape, positions)
        memory = self.alphas.get(ident)
        if memory is None:
            memory = self.alphas[ident] = AlphaMemory(step.scope, step.shape, positions)
            created.append(memory)
        return memory

    def add(self, query: Query) -> tuple[list[BetaNode], list[AlphaMemory]]:
        """Wire a query in; returns the new join nodes and the new alpha memories."""
        if query.name in self.chains:
            raise ValueError(f"a query named {query.name!r} is already registered")
        steps = compile_steps(query)
        new_nodes: list[BetaNode] = []
        new_alphas: list[AlphaMemory] = []
        nodes: list[BetaNode] = []
        parent: BetaNode | None = None
        for level, step in enumerate(steps):
            ident = (parent.ident if parent is not None else None, *step.ident_part)
            node = self.nodes.get(ident)
            if node is None:
                alpha = self._alpha(step, new_alphas, parent is None)
                star = StarJoinNode.continues(parent, step.uniform, step.row_slots, step.new_positions)
                node = (StarJoinNode if star else JoinNode)(
                    ident,
                    parent,
                    alpha,
                    level,
                    step.row_slots,
                    step.new_positions,
                    [f.bind(dict(step.slots)) for f in step.filters],
                    step.uniform,
                )
                if not step.uniform:
                    assert isinstance(node, JoinNode)
                    node.level_width = step.width
                    node.parent_uniform = parent is not None and parent.uniform
                    node.prefix_width = step.prefix_width
                if parent is not None:
                    parent.children.append(node)
                alpha.successors.append(node)
                # Deeper nodes first: a triple feeding two levels of one chain through one
                # memory must not be joined with the token it has just made (Doorenbos 2.4).
                alpha.successors.sort(key=lambda n: -n.depth)
                self.nodes[ident] = node
                new_nodes.append(node)
            node.users[query.name] = step.user_width
            nodes.append(node)
            parent = node
        last = steps[-1]
        projection = [(name, last.slots[name]) for name in query.projection() if name in last.slots]
        production = Production(query.name, last.uniform, last.user_width, projection, self.deliver, self.clock)
        nodes[-1].productions.append(production)
        self.chains[query.name] = Chain(query, nodes, production, steps)
        self._update_widths()
        return new_nodes, new_alphas

    def remove(self, name: str) -> list[AlphaMemory]:
        """Unwire a query; shared nodes keep their state. Returns the removed memories."""
        chain = self.chains.pop(name)
        chain.nodes[-1].productions.remove(chain.production)
        removed: list[AlphaMemory] = []
        for node in reversed(chain.nodes):
            node.users.pop(name, None)
            if node.users:
                continue
            if node.parent is not None:
                node.parent.children.remove(node)
            alpha = node.alpha
            alpha.successors.remove(node)
            del self.nodes[node.ident]
            if not alpha.successors:
                del self.alphas[alpha_ident(alpha.scope, alpha.shape, alpha.key_positions)]
                removed.append(alpha)
        self._update_widths()
        return removed

    def _update_widths(self) -> None:
        for node in self.nodes.values():
            node.width = max(node.users.values(), default=0)
        for node in self.nodes.values():
            node.refresh()
        for alpha in self.alphas.values():
            alpha.width = max((n.width for n in alpha.successors), default=0)
            alpha.refresh()  # after the nodes: a node's gate depends on its children

    # -- what the epsilon-network and the dispatch need -----------------------------------

    def pattern_terms(self) -> tuple[set[str], set[str], bool, bool]:
        """Constant classes and predicates of all patterns, and whether any is a variable."""
        classes: set[str] = set()
        properties: set[str] = set()
        any_class = any_property = False
        for alpha in self.alphas.values():
            shape = alpha.shape
            if shape.predicate is None:
                any_property = any_class = True
            elif shape.type_class is not None:
                classes.add(shape.type_class)
            elif shape.is_type:
                any_class = True
            else:
                properties.add(shape.predicate)
        return classes, properties, any_class, any_property

    def descendants(self, node: BetaNode) -> list[BetaNode]:
        out = []
        todo = list(node.children)
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(n.children)
        return out

    def min_width(self) -> int:
        widths = [n.width for n in self.nodes.values() if n.width > 0]
        return min(widths) if widths else 0
