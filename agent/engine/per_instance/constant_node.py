"""Constant node: a fixed table of solutions (VALUES, and the empty group's single empty
solution), sent once when the network starts."""
from __future__ import annotations

from typing import Iterable

from .solutions import Node, Row


class ConstantNode(Node):
    def __init__(self, variables: Iterable[str], rows: Iterable[Row]):
        variables = tuple(variables)
        self.rows = [tuple(row) for row in rows]
        certain = [v for i, v in enumerate(variables) if all(row[i] is not None for row in self.rows)]
        super().__init__(variables, certain)

    def label(self) -> str:
        if not self.variables:
            return "the empty solution"
        return f"values {' '.join('?' + v for v in self.variables)} ({len(self.rows)} rows)"

    def start(self) -> None:
        self.emit([(row, 1) for row in self.rows])
