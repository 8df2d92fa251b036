"""Join node: SPARQL's Join of two inputs, kept incrementally (Doorenbos' join node, with
both memories hashed on the variables the two sides always share)."""
from __future__ import annotations

from typing import Optional

from .solutions import Delta, Node, Pairing


class JoinNode(Node):
    """Each input's multiset in a memory keyed by the shared variables; a delta from one side
    joins the other side's memory as it is, then enters its own. Processed in either order,
    the output deltas sum to the join of the two inputs (delta L x R_old + L_new x delta R)."""

    def __init__(self, left: Node, right: Node):
        self.pairing = Pairing(left, right)
        super().__init__(self.pairing.variables, left.certain | right.certain)
        self.left_memory: dict = {}
        self.right_memory: dict = {}
        left.connect(self.left_activation)
        right.connect(self.right_activation)
        self.inputs = (left, right)

    def label(self) -> str:
        on = " ".join(f"?{v}" for v in self.pairing.keyed)
        return f"join on {on}" if on else "join (no shared variable bound on both sides: every pair)"

    def left_activation(self, delta: Delta) -> None:
        pairing = self.pairing
        self.emit(_join(delta, pairing.left_key, self.right_memory, self.left_memory, pairing.merge,
                        pairing.compatible if pairing.checks else None, False, pairing.appends))

    def right_activation(self, delta: Delta) -> None:
        pairing = self.pairing
        self.emit(_join(delta, pairing.right_key, self.left_memory, self.right_memory, pairing.merge,
                        pairing.compatible if pairing.checks else None, True, pairing.appends))


def _join(delta: Delta, key, other_memory: dict, own_memory: dict, merge, compatible, from_right: bool,
          appends: Optional[int] = None) -> Delta:
    """One side's delta joined with the other side's memory, then added to its own memory
    (``solutions.add_to``, written out: every row of every delta takes this loop).
    ``appends``: ``Pairing.appends``, for the merge written out (None: call ``merge``)."""
    out: Delta = []
    append = out.append
    for row, weight in delta:
        k = key(row)
        bucket = other_memory.get(k)
        if bucket and appends is not None:  # the merge appends one slot of the right side
            if from_right:
                extra = (row[appends],)
                for other, other_weight in bucket.items():
                    append((other + extra, weight * other_weight))
            else:
                for other, other_weight in bucket.items():
                    append((row + (other[appends],), weight * other_weight))
        elif bucket:
            for other, other_weight in bucket.items():
                left, right = (other, row) if from_right else (row, other)
                if compatible is not None and not compatible(left, right):
                    continue
                append((merge(left, right), weight * other_weight))
        mine = own_memory.get(k)
        if mine is None:
            own_memory[k] = {row: weight}
        else:
            total = mine.get(row, 0) + weight
            if total:
                mine[row] = total
            else:
                del mine[row]
                if not mine:
                    del own_memory[k]
    return out
