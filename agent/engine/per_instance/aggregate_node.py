"""Aggregate node: GROUP BY and the aggregates of each group, kept as solutions come and go.

Each group holds the weight of its solutions and one state per aggregate
(``aggregates``); a group whose weight returns to zero is forgotten, so memory follows
the windows' content. An instance's groups are read off when it closes. Without GROUP BY
there is one group, present even when empty (``COUNT(*)`` of an empty window is 0).
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Optional, Sequence

from .aggregates import Aggregate, make_aggregate
from .solutions import Delta, Node, Row


class AggregateSpec:
    """One aggregate of the query: its function, DISTINCT, its argument, its result variable."""

    def __init__(self, function: str, distinct: bool, argument: Callable[[Row], Any] | None,
                 variable: str, separator: str = " ", by_value: bool = False,
                 reads: Optional[Sequence[int]] = None):
        self.function = function
        self.distinct = distinct
        self.argument = argument  # None: COUNT(*), whose value is the solution itself
        # The row slots the argument reads (None: unknown). The rows of one solution joined
        # with several groups' keys come one after another and share those slots, so the
        # node computes the argument once for the run (expressions are deterministic).
        self.reads = None if reads is None else tuple(reads)
        self.variable = variable
        self.separator = separator
        self.by_value = by_value  # the argument gives a Python value (None for an error), not a term

    def state(self) -> Aggregate:
        return make_aggregate(self.function, self.distinct, self.separator, self.by_value)


_NOTHING = object()  # no argument read yet


def _slots_reader(positions: tuple[int, ...]) -> Callable[[Row], Any]:
    if not positions:
        return lambda row: ()
    if len(positions) == 1:
        only = positions[0]
        return lambda row: row[only]
    return itemgetter(*positions)


def _key_reader(keys: tuple, child: Node) -> Callable[[Row], tuple]:
    """The group key of a row: the keys' values, read straight off the row's slots when
    every key is a plain variable (``keys`` then carry ``.slot``), else computed."""
    slots = [getattr(k, "slot", None) for k in keys]
    if keys and None not in slots:
        if len(slots) == 1:
            only = slots[0]
            return lambda row: (row[only],)
        take = itemgetter(*slots)
        return lambda row: take(row)
    return lambda row: tuple(k(row) for k in keys)


class _Group:
    """A group's weight and aggregate states. ``counted``: the part of the weight counted
    in the first state (a SUM or AVG) where the join-aggregate node adds decimals to it
    without counting them there (its ``n`` and ``by_rank[1]``, counts that only ``result``
    reads): the rest, ``weight - counted``, is counted in at read-off (``settle``)."""
    __slots__ = ("weight", "states", "first", "head", "counted")

    def __init__(self, specs: Sequence[AggregateSpec]):
        self.weight = 0
        self.counted = 0
        self.states = [spec.state() for spec in specs]
        if self.states:
            self.head = self.states[0]
            self.first = self.head.add  # the first state's add, looked up once

    def settle(self) -> None:
        """The decimals added and not counted, counted in the first state."""
        pending = self.weight - self.counted
        state = self.head
        state.n += pending
        state.by_rank[1] += pending
        self.counted = self.weight


_XSD_INTEGER = "<http://www.w3.org/2001/XMLSchema#integer>"


class AggregateNode(Node):
    """Groups and their aggregate states. Two kinds of aggregate need no state of their
    own: ``COUNT(*)`` is the group's weight, and ``SAMPLE`` of a GROUP BY variable (how
    rdflib hands over a grouped variable in SELECT) is that part of the group's key."""

    def __init__(self, child: Node, keys: Sequence[Callable[[Row], Optional[str]]],
                 specs: Sequence[AggregateSpec], implicit: bool):
        key_slots = [getattr(k, "slot", None) for k in keys]
        self._setup(keys, specs, implicit, key_slots)
        self._key = _key_reader(self.keys, child)
        live = self._live
        self._arguments = [(spec.argument, None if spec.reads is None or spec.argument is None
                            else _slots_reader(spec.reads)) for spec in live]
        # Per aggregate, the argument's value for each reading of its slots that some row in
        # the groups has, with how many rows have it: a row leaving gets the value it entered
        # with, not computed again (a window's solutions leave as they entered, one STEP
        # after another). An entry goes when its last row does, so this holds what the
        # groups hold.
        self._values: list[dict] = [{} for _ in live]
        # one plain-variable key and one aggregate whose argument reads one slot (the usual
        # AVG or SUM per group): their slots, for left_activation's loop written out
        reads = live[0].reads if len(live) == 1 and live[0].argument is not None else None
        self._slots: Optional[tuple[int, int]] = None
        if len(key_slots) == 1 and key_slots[0] is not None and reads is not None and len(reads) == 1:
            self._slots = (key_slots[0], reads[0])
        child.connect(self.left_activation)
        self.inputs = (child,)

    def _setup(self, keys: Sequence[Callable[[Row], Optional[str]]], specs: Sequence[AggregateSpec],
               implicit: bool, key_slots: Sequence[Optional[int]]) -> None:
        """What every aggregating node keeps: its groups, and where each result comes from.
        ``key_slots``: per key, the slot of the plain variable it reads (else None), in the
        row layout the aggregates' arguments read."""
        Node.__init__(self, [spec.variable for spec in specs], ())
        self.keys = tuple(keys)
        self.specs = tuple(specs)
        self.implicit = implicit  # no GROUP BY: one group, reported even when empty
        self.groups: dict[tuple, _Group] = {}
        self._settles = False  # whether a group's weight may hold decimals not yet counted (_Group)
        # where each result value comes from: ("state", i), ("key", position) or ("weight",)
        self._sources: list[tuple] = []
        live: list[AggregateSpec] = []
        for spec in self.specs:
            slot = getattr(spec.argument, "slot", None)
            if spec.function == "Count" and spec.argument is None and not spec.distinct:
                self._sources.append(("weight",))
            elif spec.function == "Sample" and slot is not None and slot in key_slots:
                self._sources.append(("key", key_slots.index(slot)))
            else:
                self._sources.append(("state", len(live)))
                live.append(spec)
        self._live = tuple(live)

    def label(self) -> str:
        groups = f"GROUP BY {len(self.keys)} key(s)" if not self.implicit else "one group"
        computed = ", ".join(f"{spec.function.upper()}{' DISTINCT' if spec.distinct else ''} -> ?{spec.variable}"
                             for spec in self.specs)
        return f"aggregate, {groups}: {computed}"

    def left_activation(self, delta: Delta) -> None:
        groups, live, key_of = self.groups, self._live, self._key
        arguments = self._arguments
        n = len(arguments)
        if self._slots is not None:  # the n == 1 loop below, its key and reading written out
            key_slot, read_slot = self._slots
            argument = arguments[0][0]
            values = self._values[0]
            last_read, entry = _NOTHING, None
            for row, weight in delta:
                key = (row[key_slot],)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _Group(live)
                reads = row[read_slot]
                if reads != last_read:
                    last_read = reads
                    entry = values.get(reads)
                    if entry is None:
                        entry = values[reads] = [argument(row), 0]
                entry[1] += weight
                if not entry[1]:
                    del values[reads]
                    last_read = _NOTHING
                group.first(entry[0], weight)
                group.weight += weight
                if not group.weight:
                    del groups[key]
            return
        if n == 1:  # one aggregate with a state, the usual case: the loop below, unrolled
            argument, read = arguments[0]
            values = self._values[0]
            last_read, entry = _NOTHING, None
            for row, weight in delta:
                key = key_of(row)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _Group(live)
                if argument is None:
                    value = row
                elif read is None:
                    value = argument(row)
                else:
                    reads = read(row)
                    if reads != last_read:
                        last_read = reads
                        entry = values.get(reads)
                        if entry is None:
                            entry = values[reads] = [argument(row), 0]
                    value = entry[0]
                    entry[1] += weight
                    if not entry[1]:
                        del values[reads]
                        last_read = _NOTHING
                group.states[0].add(value, weight)
                group.weight += weight
                if not group.weight:
                    del groups[key]
            return
        last_reads: list = [_NOTHING] * n  # per aggregate: the slots its argument last read ...
        entries: list = [None] * n  # ... and their entry in ``_values``
        all_values = self._values
        for row, weight in delta:
            key = key_of(row)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(live)
            states = group.states
            for i in range(n):
                argument, read = arguments[i]
                if argument is None:
                    value = row
                elif read is None:
                    value = argument(row)
                else:
                    reads = read(row)
                    if reads != last_reads[i]:
                        last_reads[i] = reads
                        values = all_values[i]
                        entry = values.get(reads)
                        if entry is None:
                            entry = values[reads] = [argument(row), 0]
                        entries[i] = entry
                    entry = entries[i]
                    value = entry[0]
                    entry[1] += weight
                    if not entry[1]:
                        del all_values[i][reads]
                        last_reads[i] = _NOTHING
                states[i].add(value, weight)
            group.weight += weight
            if not group.weight:
                del groups[key]

    def rows(self) -> list[Row]:
        """One solution per group: the aggregates' values, in ``variables`` order."""
        groups = list(self.groups.items())
        if not groups and self.implicit:
            groups = [((), _Group(self._live))]
        plan = [(0 if source[0] == "state" else 1 if source[0] == "key" else 2, source[-1]) for source in self._sources]
        out = []
        append = out.append
        settles = self._settles
        for key, group in groups:
            if settles and group.weight != group.counted:
                group.settle()
            states = group.states  # each state is the source of one value: its result is read once
            append(tuple([states[at].result() if kind == 0 else key[at] if kind == 1
                          else f'"{group.weight}"^^{_XSD_INTEGER}' for kind, at in plan]))
        return out
