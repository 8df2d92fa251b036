"""Negative node: MINUS, FILTER NOT EXISTS and FILTER EXISTS, incremental.

Like Doorenbos' negative node, it keeps per left solution the weight of the right
solutions that match it (``left_counting``), and passes the left solution while that
count is zero (MINUS, NOT EXISTS) or while it is not (EXISTS). A right solution entering
or leaving the window retracts or re-asserts the left solutions it matches.

What "matches" means:

* MINUS (SPARQL 18.5): compatible and sharing at least one bound variable.
* [NOT] EXISTS: compatible, and the EXISTS group's own top-level FILTER true on the merged
  solution. This is SPARQL's substitution of the outer solution into the inner pattern for
  the patterns users write (a group of triple patterns and filters, also over a window);
  an EXISTS whose inner pattern nests OPTIONAL or another group is evaluated the same way,
  with the inner solutions computed on their own.
"""
from __future__ import annotations

from typing import Callable, Optional

from .left_counting import LeftCountingNode
from .solutions import Delta, Node, Row

MINUS, NOT_EXISTS, EXISTS = "MINUS", "NOT EXISTS", "EXISTS"


class NegativeNode(LeftCountingNode):
    def __init__(self, left: Node, right: Node, kind: str):
        super().__init__(left, right, left.variables, left.certain)
        self.kind = kind
        self.passes_when_matched = kind == EXISTS
        self.condition: Optional[Callable[[Row], bool]] = None  # over the merged solution

    def bind_condition(self, build: Callable[[dict[str, int]], Callable[[Row], bool]]) -> None:
        self.condition = build({v: i for i, v in enumerate(self.pairing.variables)})

    def label(self) -> str:
        on = " ".join(f"?{v}" for v in self.pairing.keyed)
        return f"{self.kind.lower()}{' on ' + on if on else ''}{', with a condition' if self.condition else ''}"

    def matched(self, left: Row, right: Row) -> Optional[Row]:
        pairing = self.pairing
        if pairing.checks and not pairing.compatible(left, right):
            return None
        if self.kind == MINUS:
            return left if pairing.share_a_binding(left, right) else None
        if self.condition is None:
            return left
        return left if self.condition(pairing.merge(left, right)) else None

    def alone(self, out: Delta, left: Row, weight: int, matched: bool) -> None:
        if matched == self.passes_when_matched:
            out.append((left, weight))
