"""EP-SPARQL's temporal operators on the Rete: SEQ, EQUALS, OPTIONALSEQ, EQUALSOPTIONAL and
the interval functions getDURATION(), getSTARTTIME(), getENDTIME() (docs/engine.md,
"Temporal operators", has the semantics and an example).

The operands of SEQ and EQUALS are joined like any other groups: on their shared variables,
by the join nodes of one chain. What the operator adds is a test on intervals, which needs
every operand complete, so it sits at the end of the chain, in the production
(``TemporalProduction``): the interval of each operand is read off the entries of the
match's token chain (each level knows which pattern it matched), the operator's test applied
(SEQ: the left operand ends strictly before the right one starts; EQUALS: both start and end
together) and then the FILTERs that read an interval, with the interval of the group they are
written in.

An optional operand (the left side of OPTIONALSEQ and EQUALSOPTIONAL) makes two chains: one
with it, whose production applies the operator's test as above, and one without it, whose
production emits the required part alone when no solution of the optional part would pass
that test (``OptionalProbe``: it extends the match through the optional part's alpha
memories, as the chain with it would, and tests each extension). Each optional operator
doubles the chains, so a query holds at most three (``rspql.MAX_OPTIONAL_OPERATORS``).

Emission stays what it is for every pattern: a match is emitted once, when its last
triple arrives. Stream time only moves forward, so a solution of the left side of SEQ or
OPTIONALSEQ is always complete before the right side starts, and the decision "joined or
alone" made when the right side completes is final. EQUALSOPTIONAL decides at the same
moment: an optional solution completed later by a triple of the same millisecond is joined
as well, and the required part alone was already emitted (documented as such).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from .beta import Production, extend
from .filters import INTERVAL_END, INTERVAL_START
from .match import Match
from .memories import AlphaMemory, key_reader, values_reader
from .steps import Step, compile_steps, order_patterns
from .query import Filter, Query, TemporalOperator
from .tokens import END, NO_START, ROW, START, TIME, Token, chain_entries

Row = Sequence[str]
# An interval test on a complete match: the operator's kind and the chain levels of its two operands.
OperatorTest = tuple[str, tuple[int, ...], tuple[int, ...]]
# A FILTER that reads an interval: the levels of its group, and the predicate over the row
# with the group's start and end appended.
IntervalFilter = tuple[tuple[int, ...], Callable[[Row], bool]]


class Variant(NamedTuple):
    """One chain a query compiles to: its patterns (indexes into ``Query.patterns``) in chain
    order, the filters its join nodes place, and the optional operators left out of it."""

    order: tuple[int, ...]
    placed: tuple[Filter, ...]
    absent: tuple[TemporalOperator, ...]


def is_temporal(query: Query) -> bool:
    """True for a query that needs a ``TemporalProduction``: temporal operators or interval functions."""
    return bool(query.temporal) or any(f.interval for f in query.filters)


def variants(query: Query) -> list[Variant]:
    """The chains of a query: one per choice of which optional operands are left out (the
    first with all of them in). Required patterns come first, in ``order_patterns``' order,
    so that the chains share their first nodes."""
    optional = [op for op in query.temporal if op.optional]
    in_optional = frozenset().union(*(op.left for op in optional))
    required = [i for i in range(len(query.patterns)) if i not in in_optional]
    out = []
    for mask in range(1 << len(optional)):
        absent = tuple(op for bit, op in enumerate(optional) if mask & (1 << bit))
        gone = frozenset().union(*(op.left for op in absent))
        order = _ordered(query, required)
        for op in optional:
            if op not in absent:
                order += _ordered(query, [i for i in sorted(op.left) if i not in order])
        placed = tuple(f for f, group in zip(query.filters, _groups(query))
                       if not f.interval and not group <= gone)
        out.append(Variant(tuple(order), placed, absent))
    return out


def _ordered(query: Query, indexes: Sequence[int]) -> list[int]:
    patterns = [query.patterns[i] for i in indexes]
    remaining = list(indexes)
    out = []
    for tp in order_patterns(tuple(patterns)):
        i = next(j for j in remaining if query.patterns[j] is tp)
        remaining.remove(i)
        out.append(i)
    return out


def _groups(query: Query) -> tuple[frozenset[int], ...]:
    """The group of each filter (all patterns for a query built without the parser)."""
    if len(query.filter_groups) == len(query.filters):
        return query.filter_groups
    whole = frozenset(range(len(query.patterns)))
    return tuple(whole for _ in query.filters)


def variant_steps(query: Query, variant: Variant) -> list[Step]:
    """The steps of one chain of a temporal query."""
    return compile_steps(query, [query.patterns[i] for i in variant.order], variant.placed)


class IntervalTest:
    """The operators' tests and the interval filters of one chain, on a complete match."""

    __slots__ = ("operators", "filters")

    def __init__(self, order: Sequence[int], slots: dict[str, int], operators: Sequence[TemporalOperator],
                 filters: Sequence[tuple[Filter, frozenset[int]]]) -> None:
        level_of = {i: level for level, i in enumerate(order)}

        def levels(patterns: frozenset[int]) -> tuple[int, ...]:
            return tuple(sorted(level_of[i] for i in patterns if i in level_of))

        tests = [(op.kind, levels(op.left), levels(op.right)) for op in operators]
        self.operators: tuple[OperatorTest, ...] = tuple(test for test in tests if test[1] and test[2])
        width = len(slots)
        with_interval = dict(slots, **{INTERVAL_START: width, INTERVAL_END: width + 1})
        self.filters: tuple[IntervalFilter, ...] = tuple(
            (levels(group), f.bind(with_interval)) for f, group in filters if levels(group))

    def holds(self, times: Sequence[int], row: Row) -> bool:
        """``times``: the timestamp of each level's entry, first level first."""
        for kind, left, right in self.operators:
            lstart, lend = _interval(times, left)
            rstart, rend = _interval(times, right)
            if lstart == NO_START or rstart == NO_START:
                return False
            if kind == "SEQ" or kind == "OPTIONALSEQ":
                if not lend < rstart:
                    return False
            elif lstart != rstart or lend != rend:
                return False
        for levels, predicate in self.filters:
            start, end = _interval(times, levels)
            if not predicate(tuple(row) + ((start, end) if start != NO_START else (None, None))):
                return False
        return True


def _interval(times: Sequence[int], levels: Sequence[int]) -> tuple[int, int]:
    """The interval of the streamed triples at these levels (static ones, ts -1, do not count)."""
    streamed = [times[level] for level in levels if times[level] >= 0]
    if not streamed:
        return NO_START, -1
    return min(streamed), max(streamed)


class ProbeLevel(NamedTuple):
    """One level of an optional part, as the chain with it would join it."""

    alpha: AlphaMemory
    read_key: Callable[[Row], object]
    new_at: int | None
    new_values: Callable[[Row], tuple]
    filters: tuple[Callable[[Row], bool], ...]


class OptionalProbe:
    """Whether an optional operand left out of a chain has a solution that its operator
    would join: the match is extended through the operand's alpha memories (hash lookups by
    the variables it shares, as its join nodes do) and each extension tested."""

    __slots__ = ("levels", "test", "width")

    def __init__(self, levels: Sequence[ProbeLevel], test: IntervalTest, width: int) -> None:
        self.levels = tuple(levels)
        self.test = test
        self.width = width

    def finds(self, token: Token) -> bool:
        tokens = [token]
        for level in self.levels:
            found: list[Token] = []
            for parent in tokens:
                bucket = level.alpha.index.get(level.read_key(parent[ROW]))
                if bucket:
                    found += extend((parent,), bucket, level.new_at, level.new_values, level.filters, self.width,
                                    None)
            if not found:
                return False
            tokens = found
        for extended in tokens:
            if self.test.holds([entry[TIME] for entry in chain_entries(extended)], extended[ROW]):
                return True
        return False


def probe_steps(query: Query, variant: Variant, op: TemporalOperator) -> list[Step]:
    """The steps of the optional operand of ``op`` as they would follow ``variant``'s chain,
    placing only that operand's own filters (at its first level if they read nothing of it)."""
    own = [f for f, group in zip(query.filters, _groups(query)) if group <= op.left and not f.interval]
    order = [query.patterns[i] for i in variant.order] + [query.patterns[i] for i in _ordered(query, sorted(op.left))]
    steps = compile_steps(query, order, own)
    head, tail = steps[:len(variant.order)], steps[len(variant.order):]
    early = [f for step in head for f in step.filters]
    tail[0].filters[:0] = early
    return tail


def probe_test(query: Query, variant: Variant, op: TemporalOperator, slots: dict[str, int]) -> IntervalTest:
    """What an extension through ``op``'s optional operand must pass: the operators inside
    the operand, ``op`` itself, and the interval filters written inside the operand."""
    order = list(variant.order) + _ordered(query, sorted(op.left))
    inner = [other for other in query.temporal if other.left | other.right <= op.left]
    timed = [(f, group) for f, group in zip(query.filters, _groups(query)) if f.interval and group <= op.left]
    return IntervalTest(order, slots, inner + [op], timed)


def variant_test(query: Query, variant: Variant, slots: dict[str, int]) -> IntervalTest:
    """What a chain's production tests: the operators of the operands it holds, and the
    interval filters of the groups it holds."""
    gone = frozenset().union(*(op.left for op in variant.absent))
    present = [op for op in query.temporal if op not in variant.absent]
    timed = [(f, group) for f, group in zip(query.filters, _groups(query)) if f.interval and not group <= gone]
    return IntervalTest(variant.order, slots, present, timed)


def probe_levels(tail: Sequence[Step], alphas: Sequence[AlphaMemory]) -> list[ProbeLevel]:
    """The levels a probe joins through: each step of the optional part with its alpha memory."""
    return [ProbeLevel(alpha, key_reader(step.row_slots),
                       step.new_positions[0] if len(step.new_positions) == 1 else None,
                       values_reader(step.new_positions), tuple(f.bind(dict(step.slots)) for f in step.filters))
            for step, alpha in zip(tail, alphas)]


class TemporalProduction(Production):
    """The production of a chain of a temporal query: the query's window, then the interval
    tests, then (in a chain that leaves optional operands out) the probes."""

    __slots__ = ("test", "probes")

    def __init__(self, name: str, width: int, projection: Sequence[tuple[str, int]],
                 deliver: Callable[[Match], None], clock: Callable[[], int], test: IntervalTest,
                 probes: Sequence[OptionalProbe]) -> None:
        super().__init__(name, True, width, projection, deliver, clock)
        self.test = test
        self.probes = tuple(probes)

    def fire(self, token: Token) -> None:
        start = token[START]
        end = token[END]
        if start == NO_START:
            return  # static triples only: no interval to test
        if end - start > self.width or start + self.width < self.clock():
            return
        if not self.test.holds([entry[TIME] for entry in chain_entries(token)], token[ROW]):
            return
        for probe in self.probes:
            if probe.finds(token):
                return
        self.count += 1
        self.deliver(Match(self.name, dict(zip(self.names, self.getter(token[ROW]))), start, end, token))
