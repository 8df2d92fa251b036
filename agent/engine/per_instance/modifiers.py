"""What happens to an instance's result when it is read off: the expressions and HAVING
over groups, projection, ORDER BY, DISTINCT, LIMIT and OFFSET.

These act on the result as a whole (an ORDER BY with LIMIT 3 depends on every row), so
they run once per reported instance over the result, which is as large as what is
reported anyway.
"""
from __future__ import annotations

from typing import Callable, Optional

from .. import filters
from ..filters import Expr
from .solutions import Row
from .term_order import order_key

Step = Callable[[list], list]


class ReadOff:
    """A chain of steps over rows in a layout that grows (Extend) or narrows (Project)."""

    def __init__(self, variables: tuple[str, ...]):
        self.variables = variables
        self.steps: list[Step] = []
        self.described: list[str] = []  # each step in words (Network.describe)

    @property
    def slots(self) -> dict[str, int]:
        return {v: i for i, v in enumerate(self.variables)}

    def extend(self, variable: str, expr: Expr) -> None:
        compute = filters.compile_term(expr, self.slots)
        self.variables += (variable,)
        self.described.append(f"extend ?{variable}")
        self.steps.append(lambda rows: [row + (compute(row),) for row in rows])

    def filter(self, expr: Expr, text: str) -> None:
        test = filters.compile_filter(expr, text).bind(self.slots)
        self.described.append(f"HAVING {text}")
        self.steps.append(lambda rows: [row for row in rows if test(row)])

    def project(self, variables: list[str]) -> None:
        slots = self.slots
        positions = [slots.get(v) for v in variables]
        self.variables = tuple(variables)
        self.described.append("project " + " ".join("?" + v for v in variables))
        self.steps.append(lambda rows: [tuple(None if i is None else row[i] for i in positions) for row in rows])

    def distinct(self) -> None:
        self.described.append("DISTINCT")
        self.steps.append(lambda rows: list(dict.fromkeys(rows)))

    def order_by(self, conditions: list[tuple[Expr, bool]]) -> None:
        slots = self.slots
        keys: list[tuple[Callable[[Row], Optional[str]], bool]] = [
            (filters.compile_term(expr, slots), descending) for expr, descending in conditions]

        def order(rows: list) -> list:
            rows = list(rows)
            for compute, descending in reversed(keys):  # stable sorts, last condition first
                rows.sort(key=lambda row: order_key(compute(row)), reverse=descending)
            return rows
        self.described.append(f"ORDER BY ({len(conditions)} keys)")
        self.steps.append(order)

    def slice(self, start: int, length: Optional[int]) -> None:
        end = None if length is None else start + length
        self.described.append(f"OFFSET {start} LIMIT {length}")
        self.steps.append(lambda rows: rows[start:end])

    def __call__(self, rows: list[Row]) -> list[Row]:
        for step in self.steps:
            rows = step(rows)
        return rows
