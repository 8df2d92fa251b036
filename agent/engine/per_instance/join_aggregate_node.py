"""Join-aggregate node: GROUP BY over a join whose group keys come from one side and whose
aggregate arguments come from the other, without building the joined solutions.

An aggregate over ``A JOIN K`` where every group key reads only K's variables and every
aggregate argument only A's: a joined solution matters to the aggregates only through its
K side's group and its A side's argument values. So the node keeps both memories keyed on
the join variables, as a join node does, but a K solution is stored with its group key
(computed once, when it first enters) and an A solution with its argument values (computed
once, when it first enters, and taken as they are when it leaves). A delta from either
side goes straight to the groups of the pairs it makes, with the weight the join would
have given the pair: the aggregate states see exactly the additions, in exactly the order,
that a join node followed by an aggregate node gives them (same groups, same order of
groups, same values to the last digit), without a joined tuple per pair or a group key
read per pair. ``compiler.Compiler.aggregate`` chooses it when the algebra allows.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Callable, Optional, Sequence

from .aggregate_node import AggregateNode, AggregateSpec, _Group
from .pattern_node import PatternNode
from .solutions import Delta, Node, Row


class _Emptied:
    """Where a K solution's group is not yet looked up: a group of weight 0, as one that
    emptied (and left ``groups``) is."""
    weight = 0


_EMPTIED = _Emptied()


class JoinAggregateNode(AggregateNode):
    """Groups and aggregate states over the join of an argument side (A) and a key side (K).

    ``a_key``/``k_key``: each side's join key (``Pairing``'s readers); ``keys``: the group
    keys over K's solutions; ``arguments``: per aggregate with a state, its argument over
    A's solutions (None for COUNT(*) kept as a state, which the compiler never passes).
    ``layout_key_slots``: the keys' slots in the join's layout, for ``_setup``.
    """

    def __init__(self, a_side: Node, k_side: Node, a_is_left: bool, a_key: Callable[[Row], object],
                 k_key: Callable[[Row], object], keys: Sequence[Callable[[Row], Optional[str]]],
                 specs: Sequence[AggregateSpec], implicit: bool, layout_key_slots: Sequence[Optional[int]],
                 on: Sequence[str]):
        self._setup(keys, specs, implicit, layout_key_slots)
        self._a_key, self._k_key = a_key, k_key
        self._on = tuple(on)
        # one join variable: its slot on each side, read in the loops (no call per solution)
        one = len(self._on) == 1
        self._a_slot = a_side.slots[self._on[0]] if one else None
        self._k_slot = k_side.slots[self._on[0]] if one else None
        self._a_is_left = a_is_left
        # join key -> {A solution: [weight, argument values]}, {K solution: [weight, group key,
        # its group]}: a group is looked up again only once it has emptied (weight 0); a K
        # solution of weight 1 that has had no A solution to pair with since it entered is
        # stored as it is, its cell made when one comes (_materialized)
        self.a_memory: dict = {}
        self.k_memory: dict = {}
        live = self._live
        self._n = len(live)
        # one SUM or AVG by value: a decimal's product with a solution's weight is worked
        # out once for all the groups it joins, and added as Sum._add_number adds a decimal
        # (a hand copy in a_activation's loop: a change to that branch goes there too)
        self._by_decimal = len(live) == 1 and live[0].by_value and live[0].function in ("Sum", "Avg")
        self._settles = self._by_decimal
        arguments = tuple(spec.argument for spec in live)
        if len(arguments) == 1:
            only = arguments[0]
            self._values_of = only
        else:
            self._values_of = lambda row: tuple(argument(row) for argument in arguments)
        key_slots = [getattr(k, "slot", None) for k in self.keys]
        # one plain-variable key: its slot, read in k_activation's loop (no call per solution)
        self._group_slot = key_slots[0] if len(key_slots) == 1 else None
        if self.keys and None not in key_slots:
            if len(key_slots) == 1:
                slot = key_slots[0]
                self._group_key = lambda row: (row[slot],)
            else:
                self._group_key = lambda row: tuple(row[s] for s in key_slots)
        else:
            keys_ = self.keys
            self._group_key = lambda row: tuple(k(row) for k in keys_)
        # the Rete's two activations: the join's left input and its right input
        if a_is_left:
            self.left_activation, self.right_activation = self.a_activation, self.k_activation
            self.inputs = (a_side, k_side)
        else:
            self.left_activation, self.right_activation = self.k_activation, self.a_activation
            self.inputs = (k_side, a_side)
        self.inputs[0].connect(self.left_activation)
        self.inputs[1].connect(self.right_activation)
        pattern = getattr(k_side, "pattern", None)
        if (isinstance(k_side, PatternNode) and k_side._activate is not None and self._k_slot is not None
                and self._group_slot is not None and pattern[0][:1] == "?" and pattern[2][:1] == "?"):
            # a pattern ``?s <p> ?o`` (distinct variables): k_activation takes its triples as
            # they are, a triple standing for its solution (they correspond one to one) and
            # the join key and the group key read at their places in the triple
            at = {t[1:]: i for i, t in enumerate(pattern) if t[:1] == "?"}
            self._k_slot = at[k_side.variables[self._k_slot]]
            self._group_slot = at[k_side.variables[self._group_slot]]
            k_side.activate = self.k_activation

    def label(self) -> str:
        side = "left" if self._a_is_left else "right"
        return (super().label().replace("aggregate,", "aggregate over a join,", 1)
                + f"; join on {' '.join('?' + v for v in self._on)}, arguments from the {side} side")

    def a_activation(self, delta: Delta) -> None:
        """A's solutions entering or leaving: each pairs with the K solutions of its join
        key, in the order the K memory holds them (a join node's order)."""
        groups, live, a_memory, k_memory = self.groups, self._live, self.a_memory, self.k_memory
        key_of, values_of, key_slot = self._a_key, self._values_of, self._a_slot
        single = self._n == 1
        n = self._n
        by_decimal = self._by_decimal
        for row, weight in delta:
            k = row[key_slot] if key_slot is not None else key_of(row)
            mine = a_memory.get(k)
            cell = None if mine is None else mine.get(row)
            if cell is None:  # the memory first (the loops below do not read it)
                values = values_of(row) if n else None
                if weight:
                    if mine is None:
                        a_memory[k] = {row: [weight, values]}
                    else:
                        mine[row] = [weight, values]
            else:
                values = cell[1]
                total = cell[0] + weight
                if total:
                    cell[0] = total
                else:
                    del mine[row]
                    if not mine:
                        del a_memory[k]
            bucket = k_memory.get(k)
            if bucket.__class__ is tuple:  # a lone K solution, stored as it is (k_activation)
                bucket = self._materialized(k, bucket)
            if bucket and by_decimal and values.__class__ is Decimal:  # the loop below, the product once
                product = values * weight
                for k_cell in bucket.values():
                    group = k_cell[2]
                    if not group.weight:
                        group = groups.get(k_cell[1])
                        if group is None:
                            group = groups[k_cell[1]] = _Group(live)
                        k_cell[2] = group
                    # Sum._add_number's decimal branch, written out: the sum here, the counts
                    # (n, by_rank[1]) left to the group's weight, counted in at read-off
                    if k_cell[0] == 1:
                        group.head.decimal += product
                        group.weight += weight
                    else:
                        w = weight * k_cell[0]
                        group.head.decimal += values * w
                        group.weight += w
                    if not group.weight:
                        del groups[k_cell[1]]
            elif bucket:
                for k_cell in bucket.values():
                    w = weight * k_cell[0]
                    group = k_cell[2]
                    if not group.weight:  # emptied since (no longer in groups), or never looked up
                        group = groups.get(k_cell[1])
                        if group is None:
                            group = groups[k_cell[1]] = _Group(live)
                        k_cell[2] = group
                    if single:
                        group.first(values, w)
                    elif n:
                        for state, value in zip(group.states, values):
                            state.add(value, w)
                    group.weight += w
                    group.counted += w  # counted by the states (_Group)
                    if not group.weight:
                        del groups[k_cell[1]]

    def _materialized(self, k, row: Row) -> dict:
        """The K memory's bucket for ``k`` made of the lone solution stored there as it is
        (weight 1, no A solution of its key since it entered): the cell ``k_activation``
        would have given it."""
        group_key = (row[self._group_slot],) if self._group_slot is not None else self._group_key(row)
        bucket = self.k_memory[k] = {row: [1, group_key, _EMPTIED]}
        return bucket

    def k_activation(self, delta: Delta) -> None:
        """K's solutions entering or leaving (or the triples of K's pattern, ``__init__``):
        each pairs with the A solutions of its join key, all in its one group. The mirror
        of ``a_activation`` (a memory cell per solution, a group looked up again once it has
        emptied): a change to one goes to the other."""
        groups, live, a_memory, k_memory = self.groups, self._live, self.a_memory, self.k_memory
        key_of, group_key_of, group_slot = self._k_key, self._group_key, self._group_slot
        key_slot = self._k_slot
        n = self._n
        for row, weight in delta:
            k = row[key_slot] if key_slot is not None else key_of(row)
            mine = k_memory.get(k)
            if mine is None:
                if weight == 1 and k not in a_memory:  # the first of its key, and nothing to pair with
                    k_memory[k] = row  # a lone solution: its cell is made when it is needed
                    continue
            elif mine.__class__ is tuple:
                if weight == -1 and (mine is row or mine == row):  # a lone solution leaves: it paired with nothing
                    del k_memory[k]
                    continue
                mine = self._materialized(k, mine)
            cell = None if mine is None else mine.get(row)
            if cell is None:
                cell = [0, (row[group_slot],) if group_slot is not None else group_key_of(row), _EMPTIED]
                if mine is None:
                    mine = k_memory[k] = {row: cell}
                else:
                    mine[row] = cell
            group_key = cell[1]
            bucket = a_memory.get(k)
            if bucket:
                for a_weight, values in bucket.values():
                    w = weight * a_weight
                    group = cell[2]
                    if not group.weight:
                        group = groups.get(group_key)
                        if group is None:
                            group = groups[group_key] = _Group(live)
                        cell[2] = group
                    if n == 1:
                        group.first(values, w)
                    elif n:
                        for state, value in zip(group.states, values):
                            state.add(value, w)
                    group.weight += w
                    group.counted += w  # counted by the states (_Group)
                    if not group.weight:
                        del groups[group_key]
            total = cell[0] + weight
            if total:
                cell[0] = total
            else:
                del mine[row]
                if not mine:
                    del k_memory[k]
