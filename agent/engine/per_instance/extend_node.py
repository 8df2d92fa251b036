"""Extend node: BIND and SELECT expressions, a new variable computed from each solution
(unbound where the expression is an error, as SPARQL says)."""
from __future__ import annotations

from typing import Callable, Optional

from .solutions import Delta, Node, Row


class ExtendNode(Node):
    def __init__(self, child: Node, variable: str,
                 build: Callable[[dict[str, int]], Callable[[Row], Optional[str]]]):
        super().__init__(child.variables + (variable,), child.certain)
        self.compute = build(child.slots)
        child.connect(self.left_activation)
        self.inputs = (child,)

    def label(self) -> str:
        return f"extend ?{self.variables[-1]}"

    def left_activation(self, delta: Delta) -> None:
        compute = self.compute
        self.emit([(row + (compute(row),), weight) for row, weight in delta])
