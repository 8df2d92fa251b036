"""Union node: SPARQL's Union; each side's solutions laid out in the union's variable order."""
from __future__ import annotations

from .solutions import Delta, Node


class UnionNode(Node):
    def __init__(self, left: Node, right: Node):
        variables = left.variables + tuple(v for v in right.variables if v not in left.slots)
        super().__init__(variables, left.certain & right.certain)
        self._left_layout = tuple(left.slots.get(v) for v in variables)
        self._right_layout = tuple(right.slots.get(v) for v in variables)
        left.connect(self.left_activation)
        right.connect(self.right_activation)
        self.inputs = (left, right)

    def label(self) -> str:
        return "union"

    @staticmethod
    def _relaid(delta: Delta, layout: tuple) -> Delta:
        return [(tuple(None if i is None else row[i] for i in layout), weight) for row, weight in delta]

    def left_activation(self, delta: Delta) -> None:
        self.emit(self._relaid(delta, self._left_layout))

    def right_activation(self, delta: Delta) -> None:
        self.emit(self._relaid(delta, self._right_layout))
