"""Optional node: SPARQL's LeftJoin (OPTIONAL, with the filter of its group), incremental.

A left solution is extended by every compatible right solution that satisfies the
condition, or passes alone when there is none. The node counts, per left solution, the
weight of its matching right solutions (``left_counting``): when that count reaches zero
the solution alone is asserted, when it leaves zero it is retracted. A window sliding past
the only reading that completed a solution therefore turns "room 3, label, 21 °C" back
into "room 3, label" without re-evaluating anything else.
"""
from __future__ import annotations

from typing import Callable, Optional

from .left_counting import LeftCountingNode
from .solutions import Delta, Node, Row


class OptionalNode(LeftCountingNode):
    def __init__(self, left: Node, right: Node, condition: Optional[Callable[[Row], bool]] = None):
        variables = left.variables + tuple(v for v in right.variables if v not in left.slots)
        super().__init__(left, right, variables, left.certain)
        self.condition = condition  # over the merged solution; None: always true

    def bind_condition(self, build: Callable[[dict[str, int]], Callable[[Row], bool]]) -> None:
        self.condition = build(self.slots)

    def label(self) -> str:
        on = " ".join(f"?{v}" for v in self.pairing.keyed)
        return f"optional (LeftJoin){' on ' + on if on else ''}{', with a condition' if self.condition else ''}"

    def matched(self, left: Row, right: Row) -> Optional[Row]:
        pairing = self.pairing
        if pairing.checks and not pairing.compatible(left, right):
            return None
        merged = pairing.merge(left, right)
        if self.condition is not None and not self.condition(merged):
            return None
        return merged

    def pair(self, out: Delta, merged: Row, weight: int) -> None:
        out.append((merged, weight))

    def alone(self, out: Delta, left: Row, weight: int, matched: bool) -> None:
        if not matched:
            out.append((left + self.pairing.padding, weight))
