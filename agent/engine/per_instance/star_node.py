"""Star node: a run of triple patterns joined on one variable (``?offer a :Offer ; :product
?p ; :price ?v``), one memory instead of a join node per pattern.

A basic graph pattern's patterns are joined left to right (``compiler.Compiler.bgp``): three
patterns on ``?offer`` make two join nodes, the first's output stored again in the second's
memory. The star node keeps, per value of the star variable, one bucket per pattern (its
solutions with their weights, in the order they came) and nothing else: a delta from one
pattern joins the other buckets of its key as they are, then enters its own bucket. Its
output is the chain of join nodes' output, solution for solution, weight for weight and in
the same order, so every node above it (an aggregate's additions, GROUP_CONCAT's order, the
order of groups and of an instance's rows) sees what it saw before:

* a delta of pattern i gives, for each of its solutions in turn, the combinations of the
  other buckets nested in pattern order (the first pattern's bucket outermost), which is
  how the chain's join nodes pass it up, except over the patterns before i when i > 1: the
  chain pairs them in the order its intermediate memory holds their joined solutions;
* that order is the nested order whenever at most one of those buckets holds more than one
  solution for the key (the usual case, one type, one product and one price an offer); when
  two or more do, it is worked out from the moment each solution entered its bucket (a
  stamp taken from one counter): a joined solution entered the chain's memory when the last
  of its parts did, ties in the order the chain made them (``_prefix``).
"""
from __future__ import annotations

from functools import partial
from itertools import count, product
from typing import Sequence

from .pattern_node import PatternNode
from .solutions import Delta, Node


class StarNode(Node):
    """The join of ``inputs`` (three or more pattern nodes, each binding ``variable`` and
    sharing no other variable with those before it), in the layout the chain of join nodes
    gives: the first input's variables, then each next input's others.

    A pattern of the usual shape (``PatternNode._fast_activation``) hands the node its
    triples as they are: the node tests its constant and reads the key and the solution's
    other terms straight off the triple (a pattern's solutions and its triples correspond
    one to one, so the triple keys its bucket). Any other pattern passes its solutions."""

    def __init__(self, inputs: Sequence[PatternNode], variable: str):
        variables = list(inputs[0].variables)
        for node in inputs[1:]:
            variables += [v for v in node.variables if v != variable]
        certain = frozenset().union(*(node.certain for node in inputs))
        super().__init__(variables, certain)
        self.variable = variable
        self.inputs = tuple(inputs)
        self.m = m = len(inputs)
        # star variable -> [bucket per input]; bucket: triple (or solution) -> [weight, stamp,
        # part], the part being what the input adds to a joined solution (three inputs: a
        # bucket is None, one cell [weight, stamp, part, triple] or such a dict, activation3)
        self.memory: dict = {}
        self._stamps = count()
        self._others = tuple(tuple(j for j in range(m) if j != i) for i in range(m))
        self._order = tuple(range(m))
        self._fresh = lambda: [{} for _ in range(m)]
        activation = self.activation3 if m == 3 else self.activation
        for i, node in enumerate(inputs):
            # where the key and the part are read, in a triple or in a solution
            keep = node.variables if i == 0 else [v for v in node.variables if v != variable]
            if node._activate is not None:
                positions = {t[1:]: at for at, t in reversed(list(enumerate(node.pattern))) if t[:1] == "?"}
                checks = [(at, t) for at, t in enumerate(node.pattern) if at != 1 and t[:1] != "?"]
                check = checks[0] if checks else None
                key_at, parts = positions[variable], tuple(positions[v] for v in keep)
                node.activate = partial(activation, i, check, key_at, parts)
            else:
                key_at, parts = node.slots[variable], tuple(node.slots[v] for v in keep)
                node.connect(partial(activation, i, None, key_at, parts))

    def label(self) -> str:
        return f"star join on ?{self.variable} ({self.m} inputs, one memory)"

    def activation(self, i: int, check, key_at: int, parts: tuple, delta: Delta) -> None:
        """Triples (or solutions) of input ``i`` entering or leaving: each joins the other
        buckets of its key, then enters its own."""
        memory, fresh, stamps = self.memory, self._fresh, self._stamps
        others, order = self._others[i], self._order
        one = parts[0] if len(parts) == 1 else None
        if check is not None:
            check_at, constant = check
        out: Delta = []
        append = out.append
        for x, weight in delta:
            if check is not None and x[check_at] != constant:
                continue
            k = x[key_at]
            entry = memory.get(k)
            if entry is None:
                entry = memory[k] = fresh()
            own = entry[i]
            cell = own.get(x)
            if cell is None:
                part = (x[one],) if one is not None else tuple([x[at] for at in parts])
            else:
                part = cell[2]
            for j in others:
                if not entry[j]:
                    break
            else:  # every other bucket holds a solution: the pairs, a join node's order
                joined = ()
                w = weight
                for j in order:
                    if j == i:
                        joined += part
                        continue
                    bucket = entry[j]
                    if len(bucket) != 1:
                        self._pairs(entry, i, part, weight, append)
                        break
                    for other in bucket.values():
                        joined += other[2]
                        w *= other[0]
                else:
                    append((joined, w))
            if cell is None:
                own[x] = [weight, next(stamps), part]
            else:
                total = cell[0] + weight
                if total:
                    cell[0] = total
                else:
                    del own[x]
                    if not own:
                        for bucket in entry:
                            if bucket:
                                break
                        else:
                            del memory[k]
        self.emit(out)

    def activation3(self, i: int, check, key_at: int, parts: tuple, delta: Delta) -> None:
        """``activation`` for a star of three inputs (the usual one), its loops written out.
        A key's buckets here are None when empty, the cell itself (``[weight, stamp, part,
        triple]``) while they hold one solution, a dict of cells only while they hold more
        (``_cells``): a solution joins single cells without a dict or a loop."""
        memory, stamps = self.memory, self._stamps
        a, b = self._others[i]
        one = parts[0] if len(parts) == 1 else None
        check_at, constant = check if check is not None else (None, None)
        out: Delta = []
        append = out.append
        for x, weight in delta:
            if check_at is not None and x[check_at] != constant:
                continue
            k = x[key_at]
            entry = memory.get(k)
            if entry is None:
                entry = memory[k] = [None, None, None]
                own = cell = None
            else:
                own = entry[i]
                if own is None:
                    cell = None
                elif own.__class__ is list:
                    cell = own if own[3] is x or own[3] == x else None
                else:
                    cell = own.get(x)
            if cell is None:
                part = (x[one],) if one is not None else tuple([x[at] for at in parts])
            else:
                part = cell[2]
            first, second = entry[a], entry[b]
            if first is not None and second is not None:
                if first.__class__ is list and second.__class__ is list:
                    w = weight * first[0] * second[0]
                    if i == 2:
                        append((first[2] + second[2] + part, w))
                    elif i == 0:
                        append((part + first[2] + second[2], w))
                    else:
                        append((first[2] + part + second[2], w))
                else:
                    self._pairs(entry, i, part, weight, append)
            if cell is None:
                new = [weight, next(stamps), part, x]
                if own is None:
                    entry[i] = new
                elif own.__class__ is list:
                    entry[i] = {own[3]: own, x: new}
                else:
                    own[x] = new
            else:
                total = cell[0] + weight
                if total:
                    cell[0] = total
                    continue
                if own is cell:
                    entry[i] = None
                else:
                    del own[x]
                    if len(own) == 1:
                        for cell in own.values():
                            entry[i] = cell
                if first is None and second is None and entry[i] is None:
                    del memory[k]
        self.emit(out)

    def _pairs(self, entry: list, i: int, part: tuple, weight: int, append) -> None:
        """A solution of input ``i`` joined with the other buckets, one holding more than
        one solution: the combinations in the chain's order (module docstring)."""
        m = self.m
        after = [_cells(entry[j]) for j in range(i + 1, m)]
        multi = sum(1 for j in range(i) if len(_cells(entry[j])) > 1)
        if i <= 1 or multi <= 1:
            before = product(*(_cells(entry[j]) for j in range(i)))
        else:
            before = _prefix([_cells(entry[j]) for j in range(i)])
        for head in before:
            w = weight
            joined = ()
            for cell in head:
                joined += cell[2]
                w *= cell[0]
            joined += part
            for tail in product(*after):
                total = w
                row = joined
                for cell in tail:
                    row += cell[2]
                    total *= cell[0]
                append((row, total))


def _cells(bucket) -> list:
    """A bucket's cells in the order they entered: a dict of them (``activation``, and
    ``activation3`` while it holds more than one), one cell, or None (empty)."""
    if bucket is None:
        return []
    if bucket.__class__ is list:
        return [bucket]
    return list(bucket.values())


def _prefix(buckets: list) -> list:
    """The combinations of the first buckets' cells in the order the chain of join nodes
    holds their joined solutions: by the moment the last of its parts entered; among those
    made at one moment, in the order of the shorter prefix, then the last bucket's order
    (the join node's loop). Each bucket's cells are in stamp order already."""
    def order(combination: tuple):
        key = (combination[0][1],)
        latest = combination[0][1]
        for cell in combination[1:]:
            if cell[1] > latest:
                latest = cell[1]
            key = (latest, key, cell[1])
        return key
    return sorted(product(*buckets), key=order)
