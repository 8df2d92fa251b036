"""Aggregate node: GROUP BY and the aggregates of each group, kept as solutions come and go.

Each group holds the weight of its solutions and one state per aggregate
(``aggregates``); a group whose weight returns to zero is forgotten, so memory follows
the windows' content. An instance's groups are read off when it closes. Without GROUP BY
there is one group, present even when empty (``COUNT(*)`` of an empty window is 0).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .aggregates import Aggregate, make_aggregate
from .solutions import Delta, Node, Row


class AggregateSpec:
    """One aggregate of the query: its function, DISTINCT, its argument, its result variable."""

    def __init__(self, function: str, distinct: bool, argument: Callable[[Row], Any] | None,
                 variable: str, separator: str = " ", by_value: bool = False):
        self.function = function
        self.distinct = distinct
        self.argument = argument  # None: COUNT(*), whose value is the solution itself
        self.variable = variable
        self.separator = separator
        self.by_value = by_value  # the argument gives a Python value (None for an error), not a term

    def state(self) -> Aggregate:
        return make_aggregate(self.function, self.distinct, self.separator, self.by_value)


class _Group:
    __slots__ = ("weight", "states")

    def __init__(self, specs: Sequence[AggregateSpec]):
        self.weight = 0
        self.states = [spec.state() for spec in specs]


class AggregateNode(Node):
    def __init__(self, child: Node, keys: Sequence[Callable[[Row], Optional[str]]],
                 specs: Sequence[AggregateSpec], implicit: bool):
        super().__init__([spec.variable for spec in specs], ())
        self.keys = tuple(keys)
        self.specs = tuple(specs)
        self.implicit = implicit  # no GROUP BY: one group, reported even when empty
        self.groups: dict[tuple, _Group] = {}
        child.connect(self.left_activation)
        self.inputs = (child,)

    def label(self) -> str:
        groups = f"GROUP BY {len(self.keys)} key(s)" if not self.implicit else "one group"
        computed = ", ".join(f"{spec.function.upper()}{' DISTINCT' if spec.distinct else ''} -> ?{spec.variable}"
                             for spec in self.specs)
        return f"aggregate, {groups}: {computed}"

    def left_activation(self, delta: Delta) -> None:
        keys, specs, groups = self.keys, self.specs, self.groups
        for row, weight in delta:
            key = tuple(k(row) for k in keys)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(specs)
            group.weight += weight
            for spec, state in zip(specs, group.states):
                state.add(row if spec.argument is None else spec.argument(row), weight)
            if group.weight == 0:
                del groups[key]

    def rows(self) -> list[Row]:
        """One solution per group: the aggregates' values, in ``variables`` order."""
        groups = list(self.groups.values())
        if not groups and self.implicit:
            groups = [_Group(self.specs)]
        return [tuple(state.result() for state in group.states) for group in groups]
