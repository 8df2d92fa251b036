"""Optional node: SPARQL's LeftJoin (OPTIONAL, with the filter of its group), incremental.

A left solution is extended by every compatible right solution that satisfies the
condition, or passes alone when there is none. The node counts, per left solution, the
weight of its matching right solutions: when that count reaches zero the solution alone
is asserted, when it leaves zero it is retracted. A window sliding past the only reading
that completed a solution therefore turns "room 3, label, 21 °C" back into "room 3, label"
without re-evaluating anything else.
"""
from __future__ import annotations

from typing import Callable, Optional

from .solutions import Delta, Node, Pairing, Row, add_to


class OptionalNode(Node):
    def __init__(self, left: Node, right: Node, condition: Optional[Callable[[Row], bool]] = None):
        self.pairing = Pairing(left, right)
        super().__init__(self.pairing.variables, left.certain)
        self.condition = condition  # over the merged solution; None: always true
        self.left_memory: dict = {}
        self.right_memory: dict = {}
        self.matches: dict[Row, int] = {}  # left solution -> weight of its matching right solutions
        left.connect(self.left_activation)
        right.connect(self.right_activation)
        self.inputs = (left, right)

    def label(self) -> str:
        on = " ".join(f"?{v}" for v in self.pairing.keyed)
        return f"optional (LeftJoin){' on ' + on if on else ''}{', with a condition' if self.condition else ''}"

    def bind_condition(self, build: Callable[[dict[str, int]], Callable[[Row], bool]]) -> None:
        self.condition = build(self.slots)

    def _pairs(self, row: Row, bucket: dict, left_side: bool):
        pairing, condition = self.pairing, self.condition
        for other, other_weight in bucket.items():
            l, r = (row, other) if left_side else (other, row)
            if pairing.checks and not pairing.compatible(l, r):
                continue
            merged = pairing.merge(l, r)
            if condition is not None and not condition(merged):
                continue
            yield other, other_weight, merged

    def left_activation(self, delta: Delta) -> None:
        pairing, out = self.pairing, []
        for row, weight in delta:
            k = pairing.left_key(row)
            count = 0
            bucket = self.right_memory.get(k)
            if bucket:
                for _, other_weight, merged in self._pairs(row, bucket, True):
                    out.append((merged, weight * other_weight))
                    count += other_weight
            if count == 0:
                out.append((row + pairing.padding, weight))
            add_to(self.left_memory, k, row, weight)
            if row in self.left_memory.get(k, ()):
                self.matches[row] = count
            else:
                self.matches.pop(row, None)
        self.emit(out)

    def right_activation(self, delta: Delta) -> None:
        pairing, out, matches = self.pairing, [], self.matches
        for row, weight in delta:
            k = pairing.right_key(row)
            bucket = self.left_memory.get(k)
            if bucket:
                for left, left_weight, merged in self._pairs(row, bucket, False):
                    out.append((merged, left_weight * weight))
                    before = matches[left]
                    after = before + weight
                    matches[left] = after
                    if before == 0 and after != 0:
                        out.append((left + pairing.padding, -left_weight))
                    elif before != 0 and after == 0:
                        out.append((left + pairing.padding, left_weight))
            add_to(self.right_memory, k, row, weight)
        self.emit(out)
