"""A query compiled to the steps of a join chain, before any node exists: the order of its
patterns, the row slot of each variable, where each FILTER goes, and what identifies each
level for sharing (``network.py`` builds and shares the nodes from these steps).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .alpha import AlphaShape
from .query import Filter, Query, TriplePattern, WindowSpec, is_var, pattern_leaves, pattern_variables

STATIC = "#static"  # static data in a scope (not an IRI, so no clash with a stream)


def stream_key(stream: str) -> str:
    """Streams are named by IRI; accept ``<iri>`` and ``iri`` alike."""
    if stream.startswith("<") and stream.endswith(">"):
        return stream[1:-1]
    return stream


def order_patterns(patterns: tuple[TriplePattern, ...], filters: Sequence[Filter] = ()) -> list[TriplePattern]:
    """Written order, but connected patterns before unconnected ones, and among the connected
    ones first one that lets a waiting FILTER run (every variable of it bound).

    A filter runs at the first level that binds all its variables, and a token it refuses
    reaches no memory after it. A threshold kept in the static data (``?patient
    ew:heartRateUpperLimit ?limit``), joined right after the reading it limits rather than
    after every other pattern of the window, keeps the window's ordinary readings out of the
    later joins: for the demo's abnormal-patient pattern, the pairs of a patient's heart
    and breathing readings over five minutes (docs/benchmarks.md, bench_agent_frugal)."""
    remaining = list(patterns)
    ordered: list[TriplePattern] = []
    bound: set[str] = set()
    waiting = [{_name(v) for v in f.variables} for f in filters]
    while remaining:
        pick = remaining[0]
        if ordered:
            connected = [tp for tp in remaining if bound.intersection(pattern_variables((tp,)))]
            if connected:
                needed = set().union(*(names for names in waiting if not names <= bound)) - bound
                pick = next((tp for tp in connected if needed.intersection(pattern_variables((tp,)))), connected[0])
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


def compile_steps(query: Query, ordered: Sequence[TriplePattern] | None = None,
                  placing: Sequence[Filter] | None = None) -> list[Step]:
    """Order the patterns, assign slots, place filters, and describe each level.

    ``ordered``: the patterns in the order to chain them (default: ``order_patterns``);
    ``placing``: the filters to place (default: every filter of the query). A query with
    temporal operators compiles to several chains that way (``temporal.py``)."""
    steps: list[Step] = []
    slots: dict[str, int] = {}  # '?var' -> slot
    placed: set[int] = set()
    windows_seen: list[str] = []
    window_levels: list[tuple] = []
    if ordered is None:
        ordered = order_patterns(query.patterns, query.filters)
    chain_filters = query.filters if placing is None else tuple(placing)
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
        for i, f in enumerate(chain_filters):
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
