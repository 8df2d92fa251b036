"""Negative node: MINUS, FILTER NOT EXISTS and FILTER EXISTS, incremental.

Like Doorenbos' negative node, it keeps per left solution the weight of the right
solutions that match it, and passes the left solution while that count is zero (MINUS,
NOT EXISTS) or while it is not (EXISTS). A right solution entering or leaving the window
retracts or re-asserts the left solutions it matches.

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

from .solutions import Delta, Node, Pairing, Row, add_to

MINUS, NOT_EXISTS, EXISTS = "MINUS", "NOT EXISTS", "EXISTS"


class NegativeNode(Node):
    def __init__(self, left: Node, right: Node, kind: str):
        self.pairing = Pairing(left, right)
        super().__init__(left.variables, left.certain)
        self.kind = kind
        self.passes_when_matched = kind == EXISTS
        self.condition: Optional[Callable[[Row], bool]] = None  # over the merged solution
        self.left_memory: dict = {}
        self.right_memory: dict = {}
        self.matches: dict[Row, int] = {}
        left.connect(self.left_activation)
        right.connect(self.right_activation)
        self.inputs = (left, right)

    def label(self) -> str:
        on = " ".join(f"?{v}" for v in self.pairing.keyed)
        return f"{self.kind.lower()}{' on ' + on if on else ''}{', with a condition' if self.condition else ''}"

    def bind_condition(self, build: Callable[[dict[str, int]], Callable[[Row], bool]]) -> None:
        self.condition = build({v: i for i, v in enumerate(self.pairing.variables)})

    def _matches(self, l: Row, r: Row) -> bool:
        pairing = self.pairing
        if pairing.checks and not pairing.compatible(l, r):
            return False
        if self.kind == MINUS:
            return pairing.share_a_binding(l, r)
        return self.condition is None or self.condition(pairing.merge(l, r))

    def left_activation(self, delta: Delta) -> None:
        pairing, out = self.pairing, []
        for row, weight in delta:
            k = pairing.left_key(row)
            count = 0
            bucket = self.right_memory.get(k)
            if bucket:
                for other, other_weight in bucket.items():
                    if self._matches(row, other):
                        count += other_weight
            if (count != 0) == self.passes_when_matched:
                out.append((row, weight))
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
                for left, left_weight in bucket.items():
                    if not self._matches(left, row):
                        continue
                    before = matches[left]
                    after = before + weight
                    matches[left] = after
                    if (before == 0) != (after == 0):
                        now_matched = after != 0
                        out.append((left, left_weight if now_matched == self.passes_when_matched else -left_weight))
            add_to(self.right_memory, k, row, weight)
        self.emit(out)
