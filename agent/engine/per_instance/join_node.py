"""Join node: SPARQL's Join of two inputs, kept incrementally (Doorenbos' join node, with
both memories hashed on the variables the two sides always share)."""
from __future__ import annotations

from .solutions import Delta, Node, Pairing, add_to


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
        pairing, right = self.pairing, self.right_memory
        key, merge, checks = pairing.left_key, pairing.merge, pairing.checks
        out: Delta = []
        for row, weight in delta:
            k = key(row)
            bucket = right.get(k)
            if bucket:
                for other, other_weight in bucket.items():
                    if checks and not pairing.compatible(row, other):
                        continue
                    out.append((merge(row, other), weight * other_weight))
            add_to(self.left_memory, k, row, weight)
        self.emit(out)

    def right_activation(self, delta: Delta) -> None:
        # left_activation's mirror: the same join with the sides' roles swapped
        pairing, left = self.pairing, self.left_memory
        key, merge, checks = pairing.right_key, pairing.merge, pairing.checks
        out: Delta = []
        for row, weight in delta:
            k = key(row)
            bucket = left.get(k)
            if bucket:
                for other, other_weight in bucket.items():
                    if checks and not pairing.compatible(other, row):
                        continue
                    out.append((merge(other, row), other_weight * weight))
            add_to(self.right_memory, k, row, weight)
        self.emit(out)
