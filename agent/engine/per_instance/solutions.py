"""Solutions, their deltas, and the base every per-instance node shares.

A solution is a tuple of canonical terms in its node's variable order (``Node.variables``),
``None`` where a variable is unbound (after OPTIONAL or UNION). The nodes pass *deltas*:
lists of ``(solution, weight)``, weight +1 for a solution that appears and -1 for one that
disappears as the window slides (larger magnitudes when several arrive at once). A node's
memory is a multiset: solution -> total weight, never stored at weight 0. Every node's
output, summed over all the deltas it has sent, is exactly its SPARQL result over the
current content of the windows: the invariant that lets an instance's result be read off
at close instead of recomputed.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Callable, Iterable, Optional

Term = str
Row = tuple  # of Term | None, in a node's variable order
Delta = list  # of (Row, int)
Activation = Callable[[Delta], None]


class Node:
    """One node of a per-instance network: its variables, those bound in every solution,
    and where its deltas go (the parent's left or right activation)."""

    def __init__(self, variables: Iterable[str], certain: Iterable[str]):
        self.variables: tuple[str, ...] = tuple(variables)
        self.certain: frozenset[str] = frozenset(certain)
        self.slots: dict[str, int] = {v: i for i, v in enumerate(self.variables)}
        self.send: Optional[Activation] = None
        self.inputs: tuple["Node", ...] = ()  # the nodes feeding this one (for describe)

    def label(self) -> str:
        """One line saying what the node does (``Network.describe``)."""
        return type(self).__name__

    def connect(self, activation: Activation) -> None:
        self.send = activation

    def emit(self, delta: Delta) -> None:
        if delta and self.send is not None:
            self.send(delta)


def add_to(memory: dict, key, row: Row, weight: int) -> None:
    """Add ``weight`` to ``row`` in the bucket ``key`` of a keyed multiset memory."""
    bucket = memory.get(key)
    if bucket is None:
        memory[key] = {row: weight}
        return
    total = bucket.get(row, 0) + weight
    if total:
        bucket[row] = total
    else:
        del bucket[row]
        if not bucket:
            del memory[key]


def _key_function(positions: tuple[int, ...]) -> Callable[[Row], object]:
    """A memory's hash key for a row: the term itself when there is one keyed variable (no
    tuple built per row), else the tuple of them. Both sides of a pairing key alike."""
    if not positions:
        return lambda row: ()
    return itemgetter(*positions)


class Pairing:
    """How solutions of two nodes meet: the hash key (variables bound on both sides), the
    other shared variables checked for compatibility, and the merged solution's layout.

    SPARQL's compatibility: every shared variable is unbound on one side or equal on both.
    """

    def __init__(self, left: Node, right: Node):
        shared = [v for v in left.variables if v in right.slots]
        keyed = [v for v in shared if v in left.certain and v in right.certain]
        self.left_key = _key_function(tuple(left.slots[v] for v in keyed))
        self.right_key = _key_function(tuple(right.slots[v] for v in keyed))
        self.checks = tuple((left.slots[v], right.slots[v]) for v in shared if v not in keyed)
        self.shared = tuple((left.slots[v], right.slots[v]) for v in shared)
        self.keyed = tuple(keyed)
        extra = [v for v in right.variables if v not in left.slots]
        self.variables = left.variables + tuple(extra)
        self.extra = tuple(right.slots[v] for v in extra)
        self.padding = (None,) * len(extra)
        # the right side's one slot the merge appends, when that is all it does (join_node
        # writes that merge out in its loop); None otherwise
        self.appends: Optional[int] = self.extra[0] if len(self.extra) == 1 and not self.checks else None
        take = itemgetter(*self.extra) if len(self.extra) > 1 else None
        first = self.extra[0] if len(self.extra) == 1 else None
        checks = self.checks

        def merge(l: Row, r: Row) -> Row:
            if checks:
                filled = list(l)
                for li, ri in checks:
                    if filled[li] is None:
                        filled[li] = r[ri]
                l = tuple(filled)
            if take is not None:
                return l + take(r)
            if first is not None:
                return l + (r[first],)
            return l
        # without variables to fill in, the merge is one concatenation
        if checks:
            self.merge = merge
        elif take is not None:
            self.merge = lambda l, r: l + take(r)
        elif first is not None:
            self.merge = lambda l, r: l + (r[first],)
        else:
            self.merge = lambda l, r: l

    def compatible(self, l: Row, r: Row) -> bool:
        for li, ri in self.checks:
            a, b = l[li], r[ri]
            if a is not None and b is not None and a != b:
                return False
        return True

    def share_a_binding(self, l: Row, r: Row) -> bool:
        """MINUS's extra condition: some variable bound on both sides."""
        for li, ri in self.shared:
            if l[li] is not None and r[ri] is not None:
                return True
        return False
