"""What the optional and negative nodes share: per left solution, the weight of the right
solutions that match it, kept as either side changes.

Doorenbos' negative node keeps this count to know when a left token passes; the optional
node (SPARQL's LeftJoin) keeps it to know when a left solution stands alone. Subclasses
say what "match" means (``matched``) and what to send: the pairs (``pair``) and the left
solution when its count leaves or reaches zero (``alone``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Optional

from .solutions import Delta, Node, Pairing, Row, add_to


class LeftCountingNode(Node, ABC):
    def __init__(self, left: Node, right: Node, variables, certain):
        self.pairing = Pairing(left, right)
        super().__init__(variables, certain)
        self.left_memory: dict = {}
        self.right_memory: dict = {}
        self.matches: dict[Row, int] = {}  # left solution -> weight of its matching right solutions
        left.connect(self.left_activation)
        right.connect(self.right_activation)
        self.inputs = (left, right)

    @abstractmethod
    def matched(self, left: Row, right: Row) -> Optional[Row]:
        """The merged solution when ``right`` matches ``left``, else None."""

    def pair(self, out: Delta, merged: Row, weight: int) -> None:
        """A matching pair entered (weight > 0) or left."""

    @abstractmethod
    def alone(self, out: Delta, left: Row, weight: int, matched: bool) -> None:
        """``left`` with ``weight``, now matched by some right solution or by none."""

    def left_activation(self, delta: Delta) -> None:
        pairing, out = self.pairing, []
        for row, weight in delta:
            k = pairing.left_key(row)
            count = 0
            bucket = self.right_memory.get(k)
            if bucket:
                for other, other_weight in bucket.items():
                    merged = self.matched(row, other)
                    if merged is not None:
                        self.pair(out, merged, weight * other_weight)
                        count += other_weight
            self.alone(out, row, weight, count != 0)
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
                    merged = self.matched(left, row)
                    if merged is None:
                        continue
                    self.pair(out, merged, left_weight * weight)
                    before = matches[left]
                    after = before + weight
                    matches[left] = after
                    if (before == 0) != (after == 0):  # the left solution's standing changed
                        self.alone(out, left, -left_weight, before != 0)
                        self.alone(out, left, left_weight, after != 0)
            add_to(self.right_memory, k, row, weight)
        self.emit(out)
