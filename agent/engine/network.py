"""The Rete network's structure: building a query's join chain from its steps (steps.py),
sharing, the production its kind needs, removal.

A query becomes a left-deep chain of join nodes, one per triple pattern, ending in a
production (beta.py; temporal.py, absence.py, consumption.py and rules.py for the other
kinds). The order of the chain: the written order, except that a pattern sharing a
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

from .absence import AbsenceProduction, AbsenceWatch, Timers, expectation
from .beta import BetaNode, JoinNode, Production, StarJoinNode
from .consumption import ChronologicalProduction, RecentLevel, RecentProduction
from .match import Match
from .memories import AlphaMemory
from .query import Query
from .rules import Rule
from .steps import Step, alpha_ident, compile_steps, order_patterns
from .tokens import Triple


@dataclass
class Chain:
    """What the network keeps for one registered query.

    A query may compile to several chains: one per choice of optional operands
    (``temporal.variants``), or an absence's two (absence.py). ``nodes``/``production`` are
    the first, ``variants`` the others, and ``probed`` the alpha memories optional parts are
    looked up in (``temporal.OptionalProbe``)."""

    query: Query
    nodes: list[BetaNode]
    production: Production
    steps: list[Step] = field(default_factory=list)
    variants: list[tuple[list[BetaNode], Production, list[Step]]] = field(default_factory=list)
    probed: list[tuple[AlphaMemory, Step]] = field(default_factory=list)

    def productions(self) -> list[Production]:
        return [self.production] + [production for _, production, _ in self.variants]

    def step_of(self, node: BetaNode) -> Step:
        """The step ``node`` was built from in this query (a chain of a variant may differ)."""
        for nodes, steps in [(self.nodes, self.steps)] + [(n, s) for n, _, s in self.variants]:
            if node.depth < len(nodes) and nodes[node.depth] is node:
                return steps[node.depth]
        raise KeyError(node.ident)


class Network:
    """Alpha memories and join nodes of every registered query, shared where possible."""

    def __init__(self, deliver: Callable[[Match], None], clock: Callable[[], int]) -> None:
        self.deliver = deliver
        self.clock = clock
        self.alphas: dict[tuple, AlphaMemory] = {}
        self.nodes: dict[tuple, BetaNode] = {}
        self.chains: dict[str, Chain] = {}
        # Alpha memories read by probes rather than join nodes: ident -> {query: width kept}.
        self.probed: dict[tuple, dict[str, int]] = {}
        self.timers = Timers()  # the deadlines of absences (absence.py)
        # Productions that chose nothing yet for the triple going through (consumption.py): the
        # engine settles them once it has gone through.
        self.deferred: list = []
        # Triples rules made, (stream, ts, triples), pushed by the engine once the triple going
        # through has; how deep each made triple is; matches too deep to make any (rules.py).
        self.derived: list[tuple[str, int, list]] = []
        # id(made triple) -> (that triple, its time, depth, its maker): rules.made_by
        self.depths: dict[int, tuple[Triple, int, int, Match]] = {}
        self.depths_kept = 1024  # the size past which the engine's collection prunes ``depths``
        self.derivations_cut = 0

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
        new_nodes: list[BetaNode] = []
        new_alphas: list[AlphaMemory] = []
        from . import temporal  # (it compiles with steps.py and builds productions: no cycle at import)

        # A rule's matches also make triples (rules.py): its productions deliver through it.
        deliver = Rule(query.construct, query.name, self, self.deliver) if query.construct else self.deliver
        if query.absence is not None:
            self.chains[query.name] = self._add_absence(query, new_nodes, new_alphas, deliver)
        elif temporal.is_temporal(query):
            self.chains[query.name] = self._add_temporal(query, new_nodes, new_alphas, deliver)
        else:
            steps = compile_steps(query)
            nodes = self._wire(query.name, steps, new_nodes, new_alphas)
            production = self._production(query, steps, nodes, deliver)
            nodes[-1].productions.append(production)
            self.chains[query.name] = Chain(query, nodes, production, steps)
        self._update_widths()
        return new_nodes, new_alphas

    def _production(self, query: Query, steps: list[Step], nodes: list[BetaNode],
                    deliver: Callable[[Match], None]) -> Production:
        """The end of a conjunctive query's chain, for its consumption strategy (consumption.py)."""
        last = steps[-1]
        projection = self._projection(query, last)
        if query.consumption == "unrestricted":
            return Production(query.name, last.uniform, last.user_width, projection, deliver, self.clock)
        if not last.uniform:
            raise ValueError(f"query {query.name!r}: CONSUME {query.consumption.upper()} needs one window")
        if query.consumption == "recent":
            levels = []
            for level, step in enumerate(steps):
                elsewhere = {v for other in steps[:level] + steps[level + 1:] for v in other.shape.variables}
                levels.append(RecentLevel(nodes[level].alpha, tuple(
                    position for v, position in zip(step.shape.variables, step.shape.positions) if v in elsewhere)))
            return RecentProduction(query.name, last.user_width, projection, deliver, self.clock, levels,
                                    self.deferred)
        written = []
        for step in steps:
            written.append(next(i for i, tp in enumerate(query.patterns) if tp is step.pattern and i not in written))
        return ChronologicalProduction(query.name, last.user_width, projection, deliver, self.clock, written,
                                       self.deferred)

    @staticmethod
    def _projection(query: Query, last: Step) -> list[tuple[str, int]]:
        return [(name, last.slots[name]) for name in query.projection() if name in last.slots]

    def _wire(self, name: str, steps: list[Step], new_nodes: list[BetaNode],
              new_alphas: list[AlphaMemory]) -> list[BetaNode]:
        """The join nodes of one chain, made or shared; returns them first level first."""
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
            node.users[name] = step.user_width
            nodes.append(node)
            parent = node
        return nodes

    def _add_temporal(self, query: Query, new_nodes: list[BetaNode], new_alphas: list[AlphaMemory],
                      deliver: Callable[[Match], None]) -> Chain:
        """The chains of a query with temporal operators (``temporal.py``), each ending in a
        ``TemporalProduction``; the alpha memories of the optional parts a chain leaves out
        are kept for the window, for its probes."""
        from . import temporal

        chain: Chain | None = None
        for variant in temporal.variants(query):
            steps = temporal.variant_steps(query, variant)
            nodes = self._wire(query.name, steps, new_nodes, new_alphas)
            last = steps[-1]
            probes = []
            for op in variant.absent:
                tail = temporal.probe_steps(query, variant, op)
                alphas = [self._alpha(step, new_alphas, False) for step in tail]
                for alpha in alphas:
                    ident = alpha_ident(alpha.scope, alpha.shape, alpha.key_positions)
                    self.probed.setdefault(ident, {})[query.name] = last.user_width
                probes.append(temporal.OptionalProbe(
                    temporal.probe_levels(tail, alphas),
                    temporal.probe_test(query, variant, op, dict(tail[-1].slots)), last.user_width))
                if chain is not None:
                    chain.probed += zip(alphas, tail)
            production = temporal.TemporalProduction(
                query.name, last.user_width, self._projection(query, last), deliver, self.clock,
                temporal.variant_test(query, variant, dict(last.slots)), probes)
            nodes[-1].productions.append(production)
            if chain is None:
                chain = Chain(query, nodes, production, steps)
            else:
                chain.variants.append((nodes, production, steps))
        assert chain is not None
        return chain

    def _add_absence(self, query: Query, new_nodes: list[BetaNode], new_alphas: list[AlphaMemory],
                     deliver: Callable[[Match], None]) -> Chain:
        """The two chains of a query with ``FILTER NOT EXISTS { Q } WITHIN D`` (absence.py):
        its other patterns, whose matches start timers, and Q, whose matches answer them."""
        absence = query.absence
        assert absence is not None
        groups = query.filter_groups if len(query.filter_groups) == len(query.filters) else \
            tuple(frozenset() for _ in query.filters)
        inside = [f for f, group in zip(query.filters, groups) if group and group <= absence.patterns]
        beside = [f for f in query.filters if not any(f is g for g in inside)]
        waited = compile_steps(query, order_patterns(tuple(
            tp for i, tp in enumerate(query.patterns) if i not in absence.patterns)), beside)
        watched = compile_steps(query, order_patterns(tuple(query.patterns[i] for i in sorted(absence.patterns))),
                                inside)
        shared = sorted(set(waited[-1].slots) & set(watched[-1].slots))
        nodes = self._wire(query.name, waited, new_nodes, new_alphas)
        last = waited[-1]
        production = AbsenceProduction(query.name, last.user_width, self._projection(query, last), deliver,
                                       self.clock, self.timers, absence.within_ms,
                                       tuple(last.slots[v] for v in shared),
                                       expectation([query.patterns[i] for i in sorted(absence.patterns)], last.slots))
        nodes[-1].productions.append(production)
        watch_nodes = self._wire(query.name, watched, new_nodes, new_alphas)
        watch = AbsenceWatch(query.name, watched[-1].user_width, self.clock, production,
                             tuple(watched[-1].slots[v] for v in shared))
        watch_nodes[-1].productions.append(watch)
        return Chain(query, nodes, production, waited, [(watch_nodes, watch, watched)])

    def forget_depths(self, now: int) -> None:
        """The depths of made triples that left every window: no match can hold them any more."""
        cutoff = now - max((node.width for node in self.nodes.values()), default=0)
        self.depths = {key: made for key, made in self.depths.items() if made[1] >= cutoff}
        self.depths_kept = max(1024, 2 * len(self.depths))

    def remove(self, name: str) -> list[AlphaMemory]:
        """Unwire a query; shared nodes keep their state. Returns the removed memories."""
        chain = self.chains.pop(name)
        if isinstance(chain.production, AbsenceProduction):
            chain.production.cancel_all()
        chain.nodes[-1].productions.remove(chain.production)
        for nodes, production, _ in chain.variants:
            nodes[-1].productions.remove(production)
        removed: list[AlphaMemory] = []
        every = {id(node): node for nodes in [chain.nodes] + [n for n, _, _ in chain.variants] for node in nodes}
        for node in sorted(every.values(), key=lambda n: -n.depth):
            node.users.pop(name, None)
            if node.users:
                continue
            if node.parent is not None:
                node.parent.children.remove(node)
            alpha = node.alpha
            alpha.successors.remove(node)
            del self.nodes[node.ident]
            self._drop_if_unused(alpha, removed)
        for alpha in {id(a): a for a, _ in chain.probed}.values():
            users = self.probed.get(alpha_ident(alpha.scope, alpha.shape, alpha.key_positions), {})
            users.pop(name, None)
            self._drop_if_unused(alpha, removed)
        self._update_widths()
        return removed

    def _drop_if_unused(self, alpha: AlphaMemory, removed: list[AlphaMemory]) -> None:
        ident = alpha_ident(alpha.scope, alpha.shape, alpha.key_positions)
        if alpha.successors or self.probed.get(ident) or self.alphas.get(ident) is not alpha:
            return
        del self.alphas[ident]
        self.probed.pop(ident, None)
        removed.append(alpha)

    def _update_widths(self) -> None:
        for node in self.nodes.values():
            node.width = max(node.users.values(), default=0)
        for node in self.nodes.values():
            node.refresh()
        for ident, alpha in self.alphas.items():
            alpha.width = max([n.width for n in alpha.successors] + list(self.probed.get(ident, {}).values()),
                              default=0)
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
