"""Filter node: the solutions for which a FILTER expression is true (errors are false)."""
from __future__ import annotations

from typing import Callable

from .solutions import Delta, Node, Row


class FilterNode(Node):
    def __init__(self, child: Node, build: Callable[[dict[str, int]], Callable[[Row], bool]], text: str = ""):
        super().__init__(child.variables, child.certain)
        self.test = build(self.slots)
        self.text = text
        child.connect(self.left_activation)
        self.inputs = (child,)

    def label(self) -> str:
        return f"filter {self.text}"

    def left_activation(self, delta: Delta) -> None:
        test = self.test
        self.emit([(row, weight) for row, weight in delta if test(row)])
