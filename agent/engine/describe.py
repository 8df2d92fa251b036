"""The compiled network as text (``Engine.describe``, ``edgewave match --explain``).

What a query compiles to is not visible from its text: which patterns share an alpha
memory, which levels form a star, where tokens are stored, which window each node keeps
and what the schema feeds into each memory. This prints that, in the terms of
docs/engine.md, so that a slow or silent query can be read off its network.

Nothing here runs per triple. Variables are shown with the names of the first registered
query that uses a node (a shared node is one node whatever its queries call them), IRIs
are shortened with the queries' prefixes, and the text is deterministic: memories and
nodes are numbered in the order they were created.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from edgewave.shared.vocab import RDF_TYPE

from .absence import AbsenceProduction, AbsenceWatch
from .beta import BetaNode, JoinNode, Production, StarJoinNode
from .epsilon import FORM_NAMES, SAME
from .query import TriplePattern
from .steps import STATIC, Step
from .temporal import TemporalProduction

if TYPE_CHECKING:
    from .engine import Engine
    from .memories import AlphaMemory

FEEDS_SHOWN = 8  # entailment sources listed per alpha memory (a large schema has thousands)
_LOCAL = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


class _Terms:
    """Shortens IRIs with the registered queries' prefixes (longest namespace first)."""

    def __init__(self, prefixes: dict[str, str]) -> None:
        self.prefixes = sorted(((ns, name) for name, ns in prefixes.items()), key=lambda p: -len(p[0]))

    def term(self, term: Any, predicate: bool = False) -> str:
        if isinstance(term, TriplePattern):
            return f"<< {self.pattern(term)} >>"
        if predicate and term == RDF_TYPE:
            return "a"
        if term[:1] == "<" and term[1:2] != "<":
            iri = term[1:-1]
            for ns, name in self.prefixes:
                if iri.startswith(ns) and _LOCAL.fullmatch(iri[len(ns):]):
                    return f"{name}:{iri[len(ns):]}"
        return term

    def pattern(self, tp: TriplePattern) -> str:
        return f"{self.term(tp.s)} {self.term(tp.p, True)} {self.term(tp.o)}"

    def scope(self, scope: tuple[str, ...]) -> str:
        return ", ".join("static" if s == STATIC else self.term(f"<{s}>") for s in scope)


def _ms(width: int | None) -> str:
    return "static" if width is None else f"{width} ms"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _queries(names: list[str]) -> str:
    return ", ".join(names) + (" (shared)" if len(names) > 1 else "")


def describe(engine: Engine) -> str:
    network = engine.network
    chains = network.chains
    prefixes: dict[str, str] = {}
    for chain in chains.values():
        for name, ns in chain.query.prefixes.items():
            prefixes.setdefault(name, ns)
    terms = _Terms(prefixes)

    def first_step(node: BetaNode) -> Step:
        """The level ``node`` is in the first registered query that uses it."""
        name = next(q for q in chains if q in node.users)
        return chains[name].step_of(node)

    probed = {id(alpha): (name, step) for name, chain in chains.items() for alpha, step in chain.probed}

    def slot_names(step: Step) -> dict[int, str]:
        return {slot: f"?{name}" for name, slot in step.slots.items()}

    alpha_label = {id(a): f"A{i}" for i, a in enumerate(network.alphas.values())}
    node_label = {id(n): f"J{i}" for i, n in enumerate(network.nodes.values())}
    index_label = {id(a.index): alpha_label[id(a)] for a in network.alphas.values()}

    feeds: dict[int, list[str]] = {}
    for table in (engine._all, engine._static_table):
        routes = [(terms.term(p, True), r) for p, r in table.preds.items()]
        routes += [(f"a {terms.term(c)}", r) for c, r in table.types.items()]
        for source, (entries, _) in sorted(routes, key=lambda item: item[0]):
            for form, _target, memories in entries:
                if form == SAME:
                    continue
                for memory in memories:
                    line = f"{source} ({FORM_NAMES[form]})"
                    listed = feeds.setdefault(id(memory), [])
                    if line not in listed:
                        listed.append(line)

    lines = [
        f"network: {_count(len(chains), 'query', 'queries')}, {_count(len(network.alphas), 'alpha memory', 'alpha memories')}, "
        f"{_count(len(network.nodes), 'join node', 'join nodes')}"
        f"{'' if engine.epsilon is not None else ', entailment off'}",
        "",
        "alpha memories",
    ]
    for alpha in network.alphas.values():
        if alpha.successors:
            lines += _alpha_lines(alpha, alpha_label[id(alpha)], first_step(alpha.successors[-1]), terms,
                                  feeds.get(id(alpha), []), list(chains), node_label)
        else:  # read only by the probe of an optional part (temporal.py)
            name, step = probed[id(alpha)]
            lines += _alpha_lines(alpha, alpha_label[id(alpha)], step, terms, feeds.get(id(alpha), []), [name],
                                  node_label)[:-1]
            lines.append(f"     read by the probe of an optional part; queries {name}")

    lines += ["", "join nodes (a left-deep chain per query, from the top token)"]

    def walk(node: BetaNode, indent: str) -> None:
        step = first_step(node)
        names = slot_names(step)
        label = node_label[id(node)]
        join = " ".join(names[s] for s in node.join_slots) or "nothing"
        if isinstance(node, StarJoinNode):
            kind = f"star join on {names[node.star_slot]}" if node.parent is not None else "star join, first level"
            kind += ", stores no tokens"
        else:
            kind = f"join on {join}" if node.parent is not None else "join, first level"
            if node.memory is not None:
                kind += f", beta memory of {node_label[id(node.parent)]}'s tokens by {join}"
        lines.append(f"{indent}{label} {kind}")
        inner = indent + "   "
        lines.append(f"{inner}right input {alpha_label[id(node.alpha)]}: {terms.pattern(step.pattern)}")
        if node.uniform:
            lines.append(f"{inner}window {_ms(node.width)}")
        else:
            assert isinstance(node, JoinNode)
            lines.append(f"{inner}window {_ms(node.level_width)} at this level (layered: several windows)")
        for f in step.filters:
            lines.append(f"{inner}FILTER {f.text}")
        if isinstance(node, StarJoinNode) and node.gate is not None:
            lines.append(f"{inner}right activation only for keys in {index_label[id(node.gate)]}")
        lines.append(f"{inner}queries {_queries([q for q in chains if q in node.users])}")
        for production in node.productions:
            if isinstance(production, AbsenceWatch):
                lines.append(f"{inner}absence watch: a match answers the timers of {production.name}")
                continue
            query = chains[production.name].query
            window = f"{production.width} ms" if production.uniform else "each pattern's own window"
            select = " ".join(f"?{name}" for name in production.names)
            lines.append(f"{inner}production {production.name}: SELECT {select}, window {window}"
                         f"{', DISTINCT (not applied)' if query.distinct else ''}")
            lines.extend(_temporal_lines(production, inner + "   "))
        for child in node.children:
            walk(child, inner)

    for node in network.nodes.values():
        if node.parent is None:
            walk(node, "  ")
    return "\n".join(lines) + "\n"


def _alpha_lines(
    alpha: AlphaMemory, label: str, step: Step, terms: _Terms, fed: list[str], queries: list[str],
    node_label: dict[int, str],
) -> list[str]:
    shape = step.shape
    by_position = {position: var for var, position in zip(shape.variables, shape.positions)}
    indexed = " ".join(by_position[p] for p in alpha.key_positions) or "nothing (one bucket)"
    readers = sorted(alpha.successors, key=lambda n: int(node_label[id(n)][1:]))
    users = [q for q in queries if any(q in n.users for n in readers)]
    out = [
        f"  {label} [{terms.pattern(step.pattern)}] from {terms.scope(alpha.scope)}",
        f"     indexed by {indexed}, keeps {alpha.width} ms" if STATIC not in alpha.scope or len(alpha.scope) > 1
        else f"     indexed by {indexed}, static until removed",
    ]
    if fed:
        shown = ", ".join(fed[:FEEDS_SHOWN])
        more = f" and {len(fed) - FEEDS_SHOWN} more" if len(fed) > FEEDS_SHOWN else ""
        out.append(f"     entailed from {shown}{more}")
    out.append(f"     read by {', '.join(node_label[id(n)] for n in readers)}; queries {_queries(users)}")
    return out


def _temporal_lines(production: Production, indent: str) -> list[str]:
    """What a temporal query's production tests (temporal.py): its operators, by the chain
    levels of their operands, its interval FILTERs, and the optional parts it probes."""
    if isinstance(production, AbsenceProduction):
        return [f"{indent}each match starts a timer of {_ms(production.within)}, reported when it passes "
                "with no match of the absent part"]
    if not isinstance(production, TemporalProduction):
        return []
    out = []
    for kind, left, right in production.test.operators:
        out.append(f"{indent}interval test {kind}: levels {_levels(left)} | {_levels(right)}")
    for levels, _ in production.test.filters:
        out.append(f"{indent}interval FILTER over levels {_levels(levels)}")
    for probe in production.probes:
        kinds = ", ".join(kind for kind, _, _ in probe.test.operators)
        out.append(f"{indent}reported alone unless the optional part "
                   f"({_count(len(probe.levels), 'pattern', 'patterns')}, {kinds}) has a match")
    return out


def _levels(levels: tuple[int, ...]) -> str:
    return ",".join(str(level) for level in levels)
