"""The engine: one Rete network (epsilon, alpha, beta) driven by stream time.

Semantics, precisely:

* **Matching.** A query is a conjunction of triple patterns (plus FILTERs), whose groups
  EP-SPARQL's temporal operators may join (``temporal.py``; docs/engine.md). Patterns in a
  ``WINDOW`` block match triples pushed on that window's stream (``push(..., stream=IRI)``;
  ``stream=None`` feeds every stream); patterns outside any WINDOW match static data
  (``add_static``) only, except that a window marked ``with_static`` (the C-SPARQL default
  window: streams and ``FROM`` graphs are one dataset) reads static data as well. Both
  go through the epsilon-network when entailment is on.
* **Windows** (Sparkwave 3.5, per token): a match of a single-window query exists iff
  ``end - start <= width``, where start/end are the earliest/latest timestamps of its
  streamed triples. With several windows, when the match's last triple arrives every
  triple must still be in its own window: ``end - ts_i <= width(window of triple i)``.
  STEP is not used: matches are emitted continuously, the moment the last triple arrives.
* **Consumption: unrestricted** by default: every distinct combination of contributing
  triples is one match, emitted once. ``CONSUME RECENT`` and ``CONSUME CHRONOLOGICAL``
  choose among them (``consumption.py``); Sparkwave's "remove a completed partial match" is
  not implemented.
* **Static data** (3.6) lives in alpha memories until removed; it does not widen
  intervals (timestamp -1 in ``Match.triples``). ``add_static``/``remove_static`` work at
  run time; removing a static triple removes every token built on it, so a changed
  threshold takes effect without rebuilding the network.
* **Time** is stream time only: the clock is the largest timestamp pushed (or passed to
  ``advance``). A match is also reported only while it is still inside its window at the
  clock (``now - start <= width``): a late triple (older than the clock) still joins, but
  only into matches a window ending now would contain. This is also what makes results
  independent of when garbage collection happens to run.
  Garbage collection (3.7) runs inside ``push``/``advance`` in the caller's thread and
  pops only what expired from arrival-ordered queues; it runs every ``gc_step`` ms of
  stream time (an eighth of the narrowest window, at most ``GC_STEP_MAX_MS``), so memory
  lags the window by at most that much. Correctness never depends on it: every join
  checks intervals.
* **Runtime changes**: ``add_query`` shares nodes with existing queries (their tokens and
  memories included: a new query sees the partial matches already built for a shared
  prefix, and a new alpha memory is filled from an equal memory when there is one);
  ``remove_query`` removes only the nodes no other query uses.

Hot path: ``push`` does one dict lookup (by predicate, or by class for ``rdf:type``) in a
table compiled from the epsilon-network and the alpha memories; the entry lists, for
every triple the input entails (itself included, each at most once), the memories it
feeds. No per-triple logging, no objects with a ``__dict__``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from edgewave.shared.vocab import RDF_TYPE

from .beta import BetaNode
from .epsilon import O, OS, S, SAME, SO, EpsilonNetwork, Link, Schema, derive
from .absence import AbsenceProduction
from .match import Match
from .memories import AlphaMemory
from .network import Network
from .query import Query
from .steps import STATIC
from .tokens import ENTRY, PARENT, SOURCE, TIME, TRIPLE, Triple

# A route: ((form, target, memories) for the triple and each triple it entails, how many
# of those are entailed).
Route = tuple[tuple[tuple[int, str, tuple[AlphaMemory, ...]], ...], int]
ROUTE_ENTRIES = 0
_NO_ROUTE: Route = ((), 0)

# Garbage collection pops what expired since it last ran, in the caller's thread, all at
# once, and the agent's network thread handles nothing meanwhile: an eighth of a wide
# window at a high rate is milliseconds of popping. In steps of at most this much stream
# time each pause stays short, for the same total, and memory lags the window by less
# (figures in docs/benchmarks.md, *Where the engine's time goes*).
GC_STEP_MAX_MS = 100


class _Table:
    """The dispatch of one scope: predicate (or rdf:type class) -> route."""

    __slots__ = ("preds", "types", "loops", "pred_default", "type_default")

    def __init__(self) -> None:
        self.preds: dict[str, Route] = {}
        self.types: dict[str, Route] = {}
        self.loops: dict[str, Route] = {}  # predicate -> route for triples with s == o, where it differs
        self.pred_default: Route = _NO_ROUTE
        self.type_default: Route = _NO_ROUTE


class Engine:
    """A Sparkwave-style Rete engine. Single-threaded; no I/O."""

    def __init__(
        self,
        schema: Iterable[Triple] | None = None,
        entailment: bool = True,
        on_match: Callable[[Match], None] | None = None,
    ) -> None:
        self.entailment = entailment
        self.on_match = on_match
        self._schema = Schema.from_triples(schema or ())
        self._static: dict[Triple, None] = {}
        self._evidence = (self._schema, self._static)  # what Match.entailed explains against
        self._now = -1
        self._gc_at = 0
        self._gc_step = 1
        self.network = Network(self._deliver, self._clock)
        self.epsilon: EpsilonNetwork | None = None
        self._support: dict[tuple[AlphaMemory, Triple], int] = {}
        self._tables: dict[Any, _Table] = {}
        self._all = _Table()
        self._static_table = _Table()
        self.triples_in = 0
        self.entailed = 0
        self.matches = 0
        # The matches of the push in progress, returned by push_many (a fresh list each call,
        # so a caller may keep what it was given).
        self._emitted: list[Match] = []
        self.expired_items = 0
        self.expired_tokens = 0
        self.absences_fired = 0
        self.derived_triples = 0
        self._deriving = False
        self._rebuild()

    # -- public API -----------------------------------------------------------------------

    def add_query(self, query: Query | str) -> Query:
        """Register a pattern (a Query or RSP-QL text); shares nodes with existing ones."""
        if isinstance(query, str):
            from .rspql import parse_query

            query = parse_query(query)
        new_nodes, new_alphas = self.network.add(query)
        self._rebuild()
        self._catch_up(new_nodes, new_alphas)
        self._sync_static()
        return query

    def remove_query(self, name: str) -> None:
        """Unregister a pattern; other patterns keep their state and partial matches."""
        if name not in self.network.chains:
            raise KeyError(f"no query named {name!r}")
        removed = self.network.remove(name)
        for alpha in removed:
            for pair in [(memory, triple) for memory, triple in self._support if memory is alpha]:
                del self._support[pair]
        self._rebuild()
        self._sync_static()

    def queries(self) -> list[str]:
        return list(self.network.chains)

    def set_schema(self, triples: Iterable[Triple]) -> None:
        """Replace the schema: rebuilds the epsilon-network; memories and tokens stay."""
        self._schema = Schema.from_triples(triples)
        self._evidence = (self._schema, self._static)
        self._rebuild()
        self._sync_static()

    def add_static(self, triples: Iterable[Triple]) -> None:
        """Add static triples: they match the patterns outside any WINDOW, until removed."""
        for triple in triples:
            if triple in self._static:
                continue
            self._static[triple] = None
            for memory, derived, _ in self._routes(self._static_table, triple):
                self._support_add(memory, derived, triple)

    def remove_static(self, triples: Iterable[Triple]) -> None:
        """Remove static triples and everything built on them (entailed triples, tokens)."""
        for triple in triples:
            if triple not in self._static:
                continue
            del self._static[triple]
            for memory, derived, _ in self._routes(self._static_table, triple):
                self._support_drop(memory, derived)

    def static_triples(self) -> list[Triple]:
        return list(self._static)

    def push(self, triple: Triple, ts: int, stream: str | None = None) -> list[Match]:
        """Feed one streamed triple with its timestamp (ms) and return the matches it
        completed (they also go to ``on_match`` when one is set)."""
        return self.push_many(((ts, triple),), stream)

    def push_many(self, items: Iterable[tuple[int, Triple]], stream: str | None = None) -> list[Match]:
        """Feed streamed ``(timestamp, triple)`` items in order, as ``push`` does one by one,
        and return the matches they completed, in the order they completed.

        The hot loop of the engine, written out once: a recorded stream goes through here
        without a call per triple. It copies ``Engine._routes`` (dispatch and
        ``epsilon.derive``) and ``AlphaMemory.add``; keep them in step (``test_engine_copies``
        feeds the same items both ways and compares memories and matches). ``on_match`` must
        not add or remove queries meanwhile.
        """
        if self._deriving:
            emitted = self._emitted  # a rule's triples, pushed inside the push that made them
        else:
            emitted = []
            self._emitted = emitted
        if stream is None:
            table = self._all
        else:
            table = self._tables.get(stream)
            if table is None:
                for _ in items:
                    self.triples_in += 1
                return emitted
        types = table.types
        preds = table.preds
        loops = table.loops
        type_default = table.type_default
        pred_default = table.pred_default
        now = self._now
        gc_at = self._gc_at
        timers = self.network.timers
        deferred = self.network.deferred
        made = self.network.derived  # (not ``derived``: the loop below names an entailed triple so)
        for ts, triple in items:
            self.triples_in += 1
            if ts > now:
                if ts > timers.next:  # an absence's deadline passed before this triple (absence.py)
                    self._fire_due(ts)
                self._now = now = ts
                if ts >= gc_at:
                    self._collect(ts)
                    gc_at = self._gc_at
            elif ts < 0:
                raise ValueError(f"timestamp {ts}: stream time is non-negative milliseconds")
            # Engine._routes, written out (keep in step): the route of the triple.
            s, p, o = triple
            if p == RDF_TYPE:
                route = types.get(o) or type_default
            else:
                route = preds.get(p) or pred_default
                if s == o and p in loops:
                    route = loops[p]
            entries, entailed = route
            if entailed:
                self.entailed += entailed
            for form, target, memories in entries:
                # epsilon.derive, written out (keep in step): one link applied to the triple.
                if form == SAME:
                    derived = triple
                elif form == SO:
                    derived = (s, target, o)
                elif form == S:
                    derived = (s, RDF_TYPE, target)
                elif o[0] == '"':
                    continue
                elif form == OS:
                    derived = (o, target, s)
                else:
                    derived = (o, RDF_TYPE, target)
                for memory in memories:
                    # AlphaMemory.add, written out (keep in step; test_engine_copies compares
                    # the two): this loop runs for every triple, and a call per memory costs
                    # more than the rest of it.
                    match = memory.match
                    if match is None:
                        values = derived
                    else:
                        values = match(derived)
                        if values is None:
                            continue
                    read_key = memory.read_key  # (as a local: a slot called as a method is not specialised)
                    key = read_key(values)
                    # Provenance (Match.entailed, evidence.py): an entailed entry keeps its
                    # source, an asserted one pays nothing (a source slot on every entry would
                    # cost memory; the two were measured, see docs/benchmarks.md). Recording
                    # nothing and searching at emission is not possible: the source is in no
                    # memory unless some pattern happens to want it.
                    entry = (derived, ts, values, triple) if form else (derived, ts, values)
                    bucket = memory.index.get(key)
                    if bucket is None:
                        memory.index[key] = [entry]
                    else:
                        bucket.append(entry)
                    memory.expiry.append(entry)  # streamed: ts >= 0
                    for gate, right_activation in memory.activations:
                        if gate is None or key in gate:
                            right_activation(entry, key)
            if deferred:  # a chronological query chooses among what the triple completed
                self._settle()
            if made:  # a rule made triples: they go through now, before the next triple
                self._push_derived()
        return emitted

    def _push_derived(self) -> None:
        queue = self.network.derived
        outer, self._deriving = self._deriving, True
        try:
            while queue:
                stream, ts, triples = queue.pop(0)
                self.derived_triples += len(triples)
                self.push_many([(ts, t) for t in triples], stream)
                self.triples_in -= len(triples)  # triples_in counts what was pushed from outside
        finally:
            self._deriving = outer

    def _settle(self) -> None:
        deferred = self.network.deferred
        while deferred:
            deferred.pop().settle()

    def advance(self, now: int) -> list[Match]:
        """Move stream time forward (no triple): fire the absences whose deadline passed and
        expire what left every window. Returns the matches the absences made."""
        emitted: list[Match] = []
        self._emitted = emitted
        if now > self._now:
            if now > self.network.timers.next:
                self._fire_due(now)
            self._now = now
        self._collect(self._now)
        return emitted

    def _fire_due(self, now: int) -> None:
        for waiting in self.network.timers.due(now):
            self.absences_fired += 1
            waiting.production.expire(waiting)

    def waits(self) -> bool:
        """True when a registered query has an absence (its matches wait for deadlines)."""
        return any(isinstance(chain.production, AbsenceProduction) for chain in self.network.chains.values())

    def forget_deadlines(self, through_ms: int) -> int:
        """Drop the waiting matches whose deadline is at most ``through_ms``, unreported: a
        restarted agent's replay rebuilds timers that its clock had already fired before the
        crash (window_journal.py). Returns how many."""
        dropped = 0
        for waiting in self.network.timers.due(through_ms + 1):
            waiting.production.forget(waiting)
            dropped += 1
        return dropped

    def counters(self) -> dict[str, int]:
        """The running totals, in constant time: what a status message needs.

        ``stats`` walks every memory to count what it holds; a running agent must not do
        that on its hot path, under the engine lock that every sensor message takes (what a
        call costs is in docs/benchmarks.md)."""
        return {
            "triples_in": self.triples_in,
            "entailed": self.entailed,
            "matches": self.matches,
            "expired_items": self.expired_items,
            "expired_tokens": self.expired_tokens,
            "absences_fired": self.absences_fired,
            "derived_triples": self.derived_triples,
            "derivations_cut": self.network.derivations_cut,
            "now": self._now,
        }

    def stats(self) -> dict[str, int]:
        """Counters for operators and tests, and what every memory holds (walks them all)."""
        network = self.network
        out = self.counters()
        out.update({
            "tokens": sum(n.token_count() for n in network.nodes.values()),
            "alpha_items": sum(len(a) for a in network.alphas.values()),
            "static_triples": len(self._static),
            "queries": len(network.chains),
            "alpha_memories": len(network.alphas),
            "join_nodes": len(network.nodes),
        })
        if self.epsilon is not None:
            out.update({f"epsilon_{k}": v for k, v in self.epsilon.size().items()})
        return out

    def describe(self) -> str:
        """The compiled network as text: alpha memories, join nodes, windows, productions
        and what queries share (``describe.py``; the format is shown in docs/engine.md)."""
        from .describe import describe

        return describe(self)

    def matches_per_query(self) -> dict[str, int]:
        return {name: sum(p.count for p in chain.productions()) for name, chain in self.network.chains.items()}

    # -- internals --------------------------------------------------------------------------

    def _clock(self) -> int:
        return self._now

    def _deliver(self, match: Match) -> None:
        match._evidence = self._evidence  # the schema it was made under, for Match.entailed
        if self.network.depths:  # rules made triples: the match may rest on some (Match.made_from)
            match._makers = self.network.depths  # pruning replaces the dict, this one stays whole
        self.matches += 1
        self._emitted.append(match)
        if self.on_match is not None:
            self.on_match(match)

    def _collect(self, now: int) -> None:
        network = self.network
        if len(network.depths) > network.depths_kept:
            network.forget_depths(now)
        for alpha in self.network.alphas.values():
            if alpha.expiry:
                self.expired_items += alpha.expire(now)
        for node in self.network.nodes.values():
            if node.memory is not None and node.memory.expiry:
                self.expired_tokens += node.expire(now)
        self._gc_at = now + self._gc_step

    def _rebuild(self) -> None:
        """Recompute the epsilon-network and the dispatch tables (patterns or schema changed)."""
        network = self.network
        if self.entailment and network.alphas:
            classes, properties, any_class, any_property = network.pattern_terms()
            self.epsilon = EpsilonNetwork(self._schema, classes, properties, any_class, any_property)
        else:
            self.epsilon = None
        by_stream: dict[str, list[AlphaMemory]] = {}
        static: list[AlphaMemory] = []
        for alpha in network.alphas.values():
            for stream in alpha.scope:
                if stream == STATIC:
                    static.append(alpha)
                else:
                    by_stream.setdefault(stream, []).append(alpha)
        self._tables = {}
        for stream, memories in by_stream.items():
            table = self._compile(memories)
            self._tables[stream] = table
            self._tables[f"<{stream}>"] = table
        self._all = self._compile([a for a in network.alphas.values() if a.scope != (STATIC,)])
        self._static_table = self._compile(static)
        self._gc_step = max(1, min(network.min_width() // 8, GC_STEP_MAX_MS))
        self._gc_at = self._now + self._gc_step

    def _compile(self, memories: list[AlphaMemory]) -> _Table:
        """Flatten epsilon links and alpha tests into one lookup per input triple."""
        by_pred: dict[str, list[AlphaMemory]] = {}
        by_type: dict[str, list[AlphaMemory]] = {}
        type_any: list[AlphaMemory] = []
        pred_any: list[AlphaMemory] = []
        for memory in memories:
            shape = memory.shape
            if shape.predicate is None:
                pred_any.append(memory)
            elif shape.type_class is not None:
                by_type.setdefault(shape.type_class, []).append(memory)
            elif shape.is_type:
                type_any.append(memory)
            else:
                by_pred.setdefault(shape.predicate, []).append(memory)

        def targets(predicate: str, cls: str | None = None) -> tuple[AlphaMemory, ...]:
            if predicate == RDF_TYPE:
                return tuple(by_type.get(cls, []) + type_any + pred_any)  # type: ignore[arg-type]
            return tuple(by_pred.get(predicate, []) + pred_any)

        def route(same: tuple[AlphaMemory, ...], links: list[Link]) -> Route:
            entries = [(SAME, "", same)] if same else []
            for form, target in links:
                fed = targets(RDF_TYPE, target) if form in (S, O) else targets(target)
                if fed:
                    entries.append((form, target, fed))
            return tuple(entries), sum(1 for form, _, _ in entries if form != SAME)

        epsilon = self.epsilon
        table = _Table()
        predicates = set(by_pred) | (set(epsilon.property_nodes) if epsilon else set())
        predicates.discard(RDF_TYPE)
        for p in predicates:
            links = epsilon.links_for_predicate(p) if epsilon else []
            r = route(targets(p), links)
            if r[ROUTE_ENTRIES]:
                table.preds[p] = r
            if epsilon:
                loop_links = epsilon.links_for_predicate(p, self_loop=True)
                if loop_links != links:
                    table.loops[p] = route(targets(p), loop_links)
        classes = set(by_type) | (set(epsilon.class_nodes) if epsilon else set())
        for c in classes:
            r = route(targets(RDF_TYPE, c), epsilon.links_for_class(c) if epsilon else [])
            if r[ROUTE_ENTRIES]:
                table.types[c] = r
        if pred_any:
            table.pred_default = route(tuple(pred_any), [])
        if type_any or pred_any:
            table.type_default = route(tuple(type_any + pred_any), [])
        return table

    def _catch_up(self, new_nodes: list[BetaNode], new_alphas: list[AlphaMemory]) -> None:
        """Give new nodes the state shared parts already hold (see the module docstring)."""
        new_ids = {id(n) for n in new_nodes}
        for node in new_nodes:
            parent = node.parent
            if parent is None or id(parent) in new_ids:
                continue
            tokens = parent.current_tokens(new_ids)
            if tokens is not None:
                node.adopt(tokens)
        for alpha in new_alphas:
            if alpha.scope == (STATIC,):
                continue  # filled by _sync_static
            sibling = next(
                (
                    a
                    for a in self.network.alphas.values()
                    if a is not alpha and a.scope == alpha.scope and a.shape.canonical == alpha.shape.canonical
                    and id(a) not in {id(n) for n in new_alphas}
                ),
                None,
            )
            if sibling is not None:
                for entry in list(sibling.expiry):
                    alpha.add(entry[TRIPLE], entry[TIME], entry[SOURCE] if len(entry) > SOURCE else None)

    # -- static data ------------------------------------------------------------------------

    def _routes(self, table: _Table, triple: Triple) -> list[tuple[AlphaMemory, Triple, int]]:
        """(memory, triple, form) for every memory of ``table`` that the triple, or a triple
        it entails (by link ``form``), reaches and passes the tests of: the dispatch
        ``push_many`` writes out. Static data goes through here."""
        s, p, o = triple
        if p == RDF_TYPE:
            route = table.types.get(o) or table.type_default
        else:
            route = table.preds.get(p) or table.pred_default
            if s == o and p in table.loops:
                route = table.loops[p]
        out = []
        for form, target, memories in route[ROUTE_ENTRIES]:
            derived = derive(triple, form, target)
            if derived is None:
                continue
            for memory in memories:
                if memory.match is None or memory.match(derived) is not None:
                    out.append((memory, derived, form))
        return out

    def _support_add(self, memory: AlphaMemory, derived: Triple, source: Triple) -> None:
        """One more static triple (``source``) puts ``derived`` in ``memory``; the first stores it,
        with ``source`` kept on the entry when ``derived`` is entailed (see evidence.py)."""
        pair = (memory, derived)
        count = self._support.get(pair, 0)
        self._support[pair] = count + 1
        if count == 0:
            memory.add(derived, -1, None if derived == source else source)

    def _support_drop(self, memory: AlphaMemory, derived: Triple) -> None:
        pair = (memory, derived)
        count = self._support.get(pair, 0)
        if count > 1:
            self._support[pair] = count - 1
            return
        self._support.pop(pair, None)
        if memory.remove_static(derived):
            self._purge_static(memory, derived)

    def _purge_static(self, memory: AlphaMemory, derived: Triple) -> None:
        """Remove every token that used a static triple through ``memory``."""
        for node in memory.successors:
            level = node.depth

            def keep(token: tuple, up: int = 0) -> bool:
                for _ in range(up):
                    token = token[PARENT]
                entry = token[ENTRY]
                return not (entry[TIME] < 0 and entry[TRIPLE] == derived)

            for child in self.network.descendants(node):
                up = child.depth - 1 - level
                child.purge(lambda t, up=up: keep(t, up))

    def _sync_static(self) -> None:
        """Make static memories agree with the static triples (after a network/schema change)."""
        wanted: dict[tuple[AlphaMemory, Triple], int] = {}
        sources: dict[tuple[AlphaMemory, Triple], Triple] = {}
        for triple in self._static:
            for memory, derived, _ in self._routes(self._static_table, triple):
                pair = (memory, derived)
                wanted[pair] = wanted.get(pair, 0) + 1
                sources.setdefault(pair, triple)
        for pair in [p for p in self._support if p not in wanted]:
            self._support[pair] = 1
            self._support_drop(*pair)
        for pair, count in wanted.items():
            if pair not in self._support:
                self._support_add(*pair, sources[pair])
            self._support[pair] = count


__all__ = ["Engine", "Match"]
