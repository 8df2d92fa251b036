"""Per-instance evaluation of one query: triples in, one result per reported window instance out.

The stream is pushed triple by triple, as in continuous matching. Each triple (and what the
schema entails from it: the same epsilon-network as continuous matching, one hop through
flattened links) waits in the windows of its stream; when stream time reaches an
instance's end, every window moves to its latest closed instance, the network takes the
content that left and entered, and the result is read off.

Report policies (``report=``, ``reporting.py``): ``non-empty`` (default), ``window-close``,
``on-change``, ``periodic:DURATION``. Stream kinds: RSTREAM reports the instance's
solutions; ISTREAM those not in the last reported result, DSTREAM those of the last
reported result not in this one, both as multiset differences (a solution present twice
before and three times now is reported once by ISTREAM).

A triple older than the end of the last closed instance is *late*: counted in
``late_triples`` and still admitted to the instances not yet closed that hold its time.
``lateness_ms`` delays closing an instance by that much stream time, for streams whose
triples arrive a little out of order.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Callable, Iterable, NamedTuple, Optional

from ..epsilon import EpsilonNetwork, Schema, derive
from ....shared.vocab import RDF_TYPE
from .front import InstanceQuery, parse_instance_query
from .pattern_node import PatternNode
from .reporting import ReportPolicy
from .windows import WindowContent

Triple = tuple


# what _push_one_window makes of a predicate (its ``kinds``)
KEEP, QUIET, TYPE, OTHER = "keep", "quiet", "type", "other"
TYPED_MEMO = 4096  # rdf:type triples whose entailments push_many keeps (then forgets them all)


class InstanceResult(NamedTuple):
    query: str
    start: int
    end: int
    stream: str
    rows: list  # of {variable: N-Triples term}; an unbound variable is absent

    def as_json(self) -> dict:
        return {"query": self.query, "window": {"start": self.start, "end": self.end},
                "stream": self.stream, "rows": self.rows}


class _Dataset:
    """The pattern nodes reading one dataset (a window, or the static data), indexed by their
    constant predicate, so that a changed triple reaches only the patterns it can match."""

    def __init__(self) -> None:
        self.by_predicate: dict[str, list[PatternNode]] = {}
        self.any_predicate: list[PatternNode] = []

    def add(self, node: PatternNode) -> None:
        if node.predicate is None:
            self.any_predicate.append(node)
        else:
            self.by_predicate.setdefault(node.predicate, []).append(node)

    def accepted(self) -> Optional[frozenset]:
        """The predicates a triple needs to reach some pattern here; None: any predicate."""
        return None if self.any_predicate else frozenset(self.by_predicate)

    def apply(self, changes: list) -> None:
        """Each node gets the changes it can match, in their order; the nodes are activated
        in the order of the first change each gets (that order decides the order of rows)."""
        by_predicate: defaultdict[str, list] = defaultdict(list)  # in the order of each one's first change
        for change in changes:
            by_predicate[change[0][1]].append(change)
        per_node: dict[PatternNode, list] = {}
        for p, same in by_predicate.items():
            for node in self.by_predicate.get(p, ()):
                per_node[node] = same  # a node is listed under its one predicate
            if self.any_predicate:
                for node in self.any_predicate:
                    per_node.setdefault(node, changes)
        for node, node_changes in per_node.items():
            node.activate(node_changes)


class InstanceEvaluator:
    """One per-instance query over its windows: push triples, get the instances they close.
    Single-threaded and without I/O, like the continuous engine."""

    def __init__(self, query: InstanceQuery | str, schema: Iterable[Triple] = (), *, entailment: bool = True,
                 report: str = "non-empty", lateness_ms: int = 0, default_width_ms: Optional[int] = None):
        if isinstance(query, str):
            query = parse_instance_query(query, default_width_ms=default_width_ms)
        self.query = query
        self.policy = ReportPolicy.parse(report)
        self.report = self.policy.kind
        self.lateness_ms = lateness_ms
        self.network = query.compile()
        self.windows = {name: WindowContent(spec.width_ms, spec.step_ms or spec.width_ms)
                        for name, spec in query.windows.items()}
        self.with_static = [name for name, spec in query.windows.items() if spec.with_static]
        self.readers: dict[str, list[str]] = {}  # stream -> the windows reading it
        for name, spec in query.windows.items():
            for stream in spec.streams():
                self.readers.setdefault(stream, []).append(name)
        if None in self.readers:  # a window on the default stream reads every stream
            every = self.readers[None]
            for stream, names in self.readers.items():
                if stream is not None:
                    names.extend(n for n in every if n not in names)
        self.datasets: dict[Optional[str], _Dataset] = {}
        for node in self.network.patterns:
            self.datasets.setdefault(node.dataset, _Dataset()).add(node)
        # per window, the predicates a triple needs to reach one of its patterns (None: any);
        # the others only make the instances they fall in non-empty (WindowContent.witness)
        self._accepts: dict[str, Optional[frozenset]] = {
            name: self.datasets[name].accepted() if name in self.datasets else frozenset() for name in self.windows}
        self.epsilon = self._epsilon(schema) if entailment else None
        self._class_links: dict[str, list] = {}  # class -> its epsilon links
        self._predicate_links: dict[str, list] = {}  # predicate -> its epsilon links
        self.static_sources: set[Triple] = set()
        self.static_copies: dict[Triple, int] = {}  # each static triple and entailment: how many sources give it
        self.result: Counter = Counter()  # the root's solutions, without aggregates
        if self.network.aggregate is None:
            self.network.root.connect(self._collect)
        for constant in self.network.constants:
            constant.start()
        self.stream_time = -1
        self.closed_until = -1  # the end of the last closed instance
        self.previous: Optional[Counter] = None  # the last reported result (ISTREAM, DSTREAM, on-change)
        self.last_reported: Optional[int] = None  # the end of the last reported instance (periodic)
        self.last_was_empty = True
        self.triples_in = 0
        self.entailed = 0  # triples the schema entailed from the stream's (before a window's set semantics)
        self.late_triples = 0
        self.instances_closed = 0
        self.instances_reported = 0
        self._next: int | None | bool = False  # the next instant to close; False: to work out again
        # whether a report needs the last reported result (ISTREAM, DSTREAM, on-change)
        self._keeps_previous = self.query.stream != "RSTREAM" or self.report == "on-change"

    # ------------------------------------------------------------------ input
    def _epsilon(self, schema: Iterable[Triple]) -> Optional[EpsilonNetwork]:
        triples = list(schema)
        if not triples:
            return None
        classes, properties, all_classes, all_properties = set(), set(), False, False
        for node in self.network.patterns:
            _, p, o = node.pattern
            if p.startswith("?"):
                all_classes = all_properties = True
            elif p == RDF_TYPE:
                if o.startswith("?"):
                    all_classes = True
                else:
                    classes.add(o)
            else:
                properties.add(p)
        return EpsilonNetwork(Schema.from_triples(triples), classes, properties, all_classes, all_properties)

    def _entailed(self, triple: Triple) -> list[Triple]:
        """The triple and what the schema entails from it: the epsilon-network's flattened
        links, looked up once per class or predicate."""
        epsilon = self.epsilon
        if epsilon is None:
            return [triple]
        s, p, o = triple
        if p == RDF_TYPE:
            links = self._links_of_class(o)
        elif s == o:  # a self-loop has links of its own (epsilon.links_for_predicate)
            return [triple, *epsilon.entail(triple)]
        else:
            links = self._links_of_predicate(p)
        if not links:
            return [triple]
        out = [triple]
        for form, target in links:
            derived = derive(triple, form, target)
            if derived is not None and derived != triple:
                out.append(derived)
        return out

    def _links_of_class(self, o: str) -> list:
        links = self._class_links.get(o)
        if links is None:
            links = self._class_links[o] = self.epsilon.links_for_class(o)
        return links

    def _links_of_predicate(self, p: str) -> list:
        links = self._predicate_links.get(p)
        if links is None:
            links = self._predicate_links[p] = self.epsilon.links_for_predicate(p)
        return links

    def add_static(self, triples: Iterable[Triple]) -> None:
        """Background triples: the default graph of an RSP-QL query, and part of every
        C-SPARQL (FROM STREAM) window."""
        entering = []
        for triple in triples:
            if triple in self.static_sources:
                continue
            self.static_sources.add(triple)
            for t in self._entailed(triple):
                before = self.static_copies.get(t, 0)
                self.static_copies[t] = before + 1
                if not before:
                    entering.append((t, 1))
        self._static_changes(entering)

    def remove_static(self, triples: Iterable[Triple]) -> None:
        """Background triples no longer there (a changed threshold): what they alone
        entailed leaves too. The windows' content stays."""
        leaving = []
        for triple in triples:
            if triple not in self.static_sources:
                continue
            self.static_sources.discard(triple)
            for t in self._entailed(triple):
                left = self.static_copies[t] - 1
                if left:
                    self.static_copies[t] = left
                else:
                    del self.static_copies[t]
                    leaving.append((t, -1))
        self._static_changes(leaving)

    def _static_changes(self, changes: list) -> None:
        if not changes:
            return
        if None in self.datasets:
            self.datasets[None].apply(changes)
        for name in self.with_static:
            copies = self.windows[name].copies
            window_changes = []
            for triple, sign in changes:
                before = copies.get(triple, 0)
                if before + sign:
                    copies[triple] = before + sign
                else:
                    del copies[triple]
                if not before or not before + sign:
                    window_changes.append((triple, sign))
            if name in self.datasets:
                self.datasets[name].apply(window_changes)

    def push(self, triple: Triple, ts: int, stream: Optional[str] = None) -> list[InstanceResult]:
        """One streamed triple; the instances its time closes, reported first."""
        # advance() closes nothing unless time moved on or the next instant is to work out
        results = self.advance(ts) if ts > self.stream_time or self._next is False else []
        self.triples_in += 1
        if ts < self.closed_until:
            self.late_triples += 1
        windows = self.windows
        names = windows if stream is None else self.readers.get(stream, self.readers.get(None, ()))
        entailed = self._entailed(triple)
        self.entailed += len(entailed) - 1
        for name in names:
            window = windows[name]
            if window.end is None or not window.holds():
                self._next = False  # where this window's next instance ends may have moved
            accepts = self._accepts[name]
            kept = False
            for t in entailed:
                if accepts is None or t[1] in accepts:
                    window.add(ts, t)
                    kept = True
            if not kept:
                window.witness(ts)
        return results

    def push_many(self, items: Iterable[tuple[int, Triple]], stream: Optional[str] = None,
                  report: Optional[Callable[[list[InstanceResult]], None]] = None) -> int:
        """``push`` over ``(ts, triple)`` items in order; each instance closed is handed to
        ``report`` as it closes (one can hold thousands of rows: none is kept here). An item
        ``(ts, n)``, ``n`` an int, stands for n triples of which only the time matters
        (``only_time``), and may come after triples of its time that arrived after them:
        those hold the time already. Returns how many triples were pushed."""
        windows = self.windows
        names = windows if stream is None else self.readers.get(stream, self.readers.get(None, ()))
        targets = [(windows[name], self._accepts[name]) for name in names]
        entail, advance = self._entailed, self.advance
        # predicate -> True when its triples entail nothing and no window's patterns read it
        inert: dict[str, bool] = {}
        n = late = entailed_count = 0
        if len(targets) == 1:
            return self._push_one_window(items, targets[0], report)
        try:
            for ts, triple in items:  # push(), written out: the loop every streamed triple takes
                n += 1
                if ts > self.stream_time or self._next is False:
                    results = advance(ts)
                    if results and report is not None:
                        report(results)
                if ts < self.closed_until:
                    late += 1
                if triple.__class__ is int:  # a run of triples only timed (read_recorded's only_time)
                    n += triple - 1
                    if ts < self.closed_until:
                        late += triple - 1
                    quiet = True
                else:
                    p = triple[1]
                    quiet = inert.get(p)
                    if quiet is None:
                        quiet = inert[p] = self.only_time(stream)(p)
                if quiet and (triple.__class__ is int or triple[0] != triple[2]):
                    for window, _ in targets:
                        if window.end is None or not (window.content or window.late_content):  # holds()
                            self._next = False
                        window.witness(ts)
                    continue
                entailed = entail(triple)
                entailed_count += len(entailed) - 1
                for window, accepts in targets:
                    if window.end is None or not (window.content or window.late_content):
                        self._next = False
                    kept = False
                    for t in entailed:
                        if accepts is None or t[1] in accepts:
                            window.add(ts, t)
                            kept = True
                    if not kept:
                        window.witness(ts)
        finally:
            self.triples_in += n
            self.late_triples += late
            self.entailed += entailed_count
        return n

    def only_time(self, stream: Optional[str] = None) -> Callable[[str], bool]:
        """Whether, of a triple of the stream with this predicate (subject and object
        differing), the windows need only the time: the schema entails nothing from it and
        no pattern of a window reading the stream reads it. ``push_many`` takes runs of such
        triples as ``(ts, n)`` (``read_recorded``'s ``only_time``)."""
        names = self.windows if stream is None else self.readers.get(stream, self.readers.get(None, ()))
        accepts = [self._accepts[name] for name in names]
        epsilon = self.epsilon

        def only_time(p: str) -> bool:
            return (p != RDF_TYPE and (epsilon is None or not self._links_of_predicate(p))
                    and all(a is not None and p not in a for a in accepts))
        return only_time

    def _push_one_window(self, items: Iterable[tuple[int, Triple]], target: tuple,
                         report: Optional[Callable[[list[InstanceResult]], None]]) -> int:
        """``push_many``'s loop for a stream that one window reads (the usual query): the
        loop over windows left out, and a triple the schema entails nothing from handed on
        without building the list of what it entails. A hand copy for the hot path: a
        change to ``push_many``'s loop goes here too.

        Written out further: ``advance`` is called only when it may close an instance (the
        next instant is due at the stream time reached, or is to work out again), stream
        time and the end of the last closed instance are locals between those calls, and a
        triple in time order (or a witness of a new time) is appended to the window's
        pending entries here (``WindowContent.add``, ``witness``), the window's latest
        time set once at the end: every item's time goes to this window."""
        window, accepts = target
        add, witness, entail, advance = window.add, window.witness, self._entailed, self.advance
        epsilon = self.epsilon
        # predicate -> KEEP: its triples entail nothing and a pattern reads them; QUIET: they
        # entail nothing and none does (the window keeps their time); TYPE: rdf:type; OTHER
        kinds: dict[str, object] = {}

        def kind_of(p: str) -> object:
            if p == RDF_TYPE:
                return TYPE
            if epsilon is not None and self._links_of_predicate(p):
                return OTHER
            return KEEP if accepts is None or p in accepts else QUIET
        bare_classes: dict[str, bool] = {}  # class -> an rdf:type triple of it entails nothing
        type_kept = accepts is None or RDF_TYPE in accepts
        # an rdf:type triple that entails more -> (how many more, what enters the window: a
        # bundle, the one triple a pattern reads, or None)
        typed: dict[Triple, tuple] = {}
        n = late = entailed_count = 0
        pending = window.pending
        lateness = self.lateness_ms
        top = -1  # the latest time of these items (all of them go to this window)
        never = float("inf")

        def state() -> tuple:
            """After ``advance``: when it is due next, the last closed end, whether the
            window holds a triple, the time of its last pending entry (-1: none)."""
            nxt = self._next
            due = -1 if nxt is False else never if nxt is None else nxt + lateness
            holds = window.end is not None and bool(window.content or window.late_content)
            return due, self.closed_until, holds, pending[-1][0] if pending else -1
        due, closed, holds, tail = state()
        if self.stream_time >= due:
            due = -1
        try:
            for ts, triple in items:
                n += 1
                if ts > top:
                    top = ts
                if top >= due:  # after advance, due is past self.stream_time: top decides
                    if top > self.stream_time:
                        self.stream_time = top
                    results = advance(ts)
                    if results and report is not None:
                        report(results)
                    due, closed, holds, tail = state()
                if ts < closed:
                    late += 1
                if not holds and (ts < tail or tail < 0):
                    # where this window's next instance ends may have moved: while the content
                    # is empty it is worked out from the first pending entry, which an entry
                    # after the last pending one (ts >= tail) leaves as it is
                    self._next = False
                    due = -1
                if triple.__class__ is int:  # a run of triples only timed (read_recorded's only_time)
                    n += triple - 1
                    if ts < closed:
                        late += triple - 1
                    if ts != tail:  # witness(), written out: an entry of this time is there already
                        if ts > tail:
                            pending.append((ts, None))
                            tail = ts
                        else:
                            witness(ts)
                    continue
                p = triple[1]
                kind = kinds.get(p)
                if kind is None:
                    kind = kinds[p] = kind_of(p)
                if kind is KEEP:
                    if triple[0] != triple[2]:  # a self-loop has epsilon links of its own
                        if ts >= tail:  # add(), written out
                            pending.append((ts, triple))
                            tail = ts
                        else:
                            add(ts, triple)
                        continue
                elif kind is QUIET:
                    if triple[0] != triple[2]:
                        if ts != tail:
                            if ts > tail:
                                pending.append((ts, None))
                                tail = ts
                            else:
                                witness(ts)
                        continue
                elif kind is TYPE:
                    # a class the schema gives nothing more: the triple as it is, as a plain
                    # predicate's (an rdf:type triple has no links as a self-loop)
                    bare = bare_classes.get(triple[2])
                    if bare is None:
                        bare = bare_classes[triple[2]] = epsilon is None or not self._links_of_class(triple[2])
                    if bare:
                        if type_kept:
                            if ts >= tail:
                                pending.append((ts, triple))
                                tail = ts
                            else:
                                add(ts, triple)
                        elif ts != tail:
                            if ts > tail:
                                pending.append((ts, None))
                                tail = ts
                            else:
                                witness(ts)
                        continue
                if kind is TYPE:
                    # an instance's types repeat (a product named by every offer of it): what
                    # each entails is worked out once, and enters the window as one bundle
                    # (WindowContent); a type that entails nothing is not remembered
                    known = typed.get(triple)
                    if known is None:
                        entailed = entail(triple)
                        kept = [t for t in entailed if accepts is None or t[1] in accepts]
                        known = (len(entailed) - 1, [triple, tuple(kept)] if len(kept) > 1
                                 else kept[0] if kept else None)
                        if len(entailed) > 1:
                            if len(typed) >= TYPED_MEMO:
                                typed.clear()
                            typed[triple] = known
                    entailed_count += known[0]
                    if known[1] is None:
                        if ts != tail:
                            if ts > tail:
                                pending.append((ts, None))
                                tail = ts
                            else:
                                witness(ts)
                    elif ts >= tail:
                        pending.append((ts, known[1]))
                        tail = ts
                    else:
                        add(ts, known[1])
                    continue
                entailed = entail(triple)
                entailed_count += len(entailed) - 1
                kept = False
                for t in entailed:
                    if accepts is None or t[1] in accepts:
                        add(ts, t)
                        kept = True
                if not kept:
                    witness(ts)
                tail = pending[-1][0] if pending else -1
        finally:
            if top > self.stream_time:
                self.stream_time = top
            if top > window.latest:
                window.latest = top
            self.triples_in += n
            self.late_triples += late
            self.entailed += entailed_count
        return n

    def advance(self, now: int) -> list[InstanceResult]:
        """Stream time is ``now`` (a triple's time, or the wall clock of an idle gateway):
        close every instance that ends by it."""
        if now > self.stream_time:
            self.stream_time = now
        results: list[InstanceResult] = []
        horizon = self.stream_time - self.lateness_ms
        while True:
            if self._next is False:
                self._next = self._next_instant()
            instant = self._next
            if instant is None or instant > horizon:
                return results
            self._next = False
            result = self._close(instant)
            if result is not None:
                results.append(result)

    def finish(self) -> list[InstanceResult]:
        """The end of the input: close every instance that holds a triple."""
        results: list[InstanceResult] = []
        self._next = False
        while any(w.holds_unreported() for w in self.windows.values()):
            instant = self._next_instant()
            if instant is None:
                break
            result = self._close(instant)
            if result is not None:
                results.append(result)
        return results

    def current(self) -> list[dict[str, str]]:
        """The result over the windows' content as it stands and the static data, read off
        without closing an instance (for a query whose data is all static)."""
        variables = self.network.read_off.variables
        return [{v: t for v, t in zip(variables, row) if t is not None} for row in self._read_off()]

    # ------------------------------------------------------------------ instances
    def _next_instant(self) -> Optional[int]:
        skip = self.report == "non-empty" or (self.report == "on-change" and self.last_was_empty)
        ends = [end for end in (w.next_end(skip) for w in self.windows.values()) if end is not None]
        return min(ends) if ends else None

    def _close(self, instant: int) -> Optional[InstanceResult]:
        start = instant
        for name, window in self.windows.items():
            end = window.latest_end(instant)
            if end is None:
                continue
            if end != window.end:
                changes = window.move_to(end)
                if changes and name in self.datasets:
                    self.datasets[name].apply(changes)
            start = min(start, window.start)
        self.closed_until = instant
        self.instances_closed += 1
        empty = not any(w.holds() for w in self.windows.values())
        self.last_was_empty = empty
        if empty and self.report == "non-empty":
            return None
        rows = self._read_off()
        if not self._keeps_previous:  # RSTREAM without on-change: the last result is never read
            current = None
        else:
            current = Counter(rows)
        if self.report == "on-change" and self.previous is not None and current == self.previous:
            return None
        if self.report == "periodic":
            period = self.policy.period_ms
            if self.last_reported is not None and instant // period == self.last_reported // period:
                return None
            self.last_reported = instant
        previous, self.previous = self.previous or Counter(), current
        if self.query.stream == "ISTREAM":
            rows = _difference(rows, previous)
        elif self.query.stream == "DSTREAM":
            rows = _difference(list(previous.elements()), current)
        self.instances_reported += 1
        variables = self.network.read_off.variables
        return InstanceResult(self.query.name, start, instant, self.query.stream,
                              [dict(zip(variables, row)) if None not in row  # every variable bound
                               else {v: t for v, t in zip(variables, row) if t is not None} for row in rows])

    def _read_off(self) -> list:
        if self.network.aggregate is not None:
            rows = self.network.aggregate.rows()
        else:
            rows = [row for row, weight in self.result.items() for _ in range(weight)]
        return self.network.read_off(rows)

    def _collect(self, delta: list) -> None:
        result = self.result
        for row, weight in delta:
            total = result[row] + weight
            if total:
                result[row] = total
            else:
                del result[row]


def _difference(rows: list, minus: Counter) -> list:
    """``rows`` without as many copies of each solution as ``minus`` holds, in order."""
    left = Counter(minus)
    out = []
    for row in rows:
        if left[row] > 0:
            left[row] -= 1
        else:
            out.append(row)
    return out
