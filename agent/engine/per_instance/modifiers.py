"""What happens to an instance's result when it is read off: the expressions and HAVING
over groups, projection, ORDER BY, DISTINCT, LIMIT and OFFSET.

These act on the result as a whole (an ORDER BY with LIMIT 3 depends on every row), so
they run once per reported instance over the result, which is as large as what is
reported anyway.
"""
from __future__ import annotations

from operator import itemgetter
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
        # The extends of a plain variable at the end of ``steps`` (how a SELECT renames an
        # aggregate's variable) and the width of the rows before them: a projection after
        # them reads their sources instead, as one step.
        self._copies: list[Optional[int]] = []
        self._width = len(variables)

    @property
    def slots(self) -> dict[str, int]:
        return {v: i for i, v in enumerate(self.variables)}

    def extend(self, variable: str, expr: Expr) -> None:
        if isinstance(expr, tuple) and expr[:1] == ("var",):
            # the variable's term, or unbound (None): what compile_term gives
            source = self.slots.get(expr[1])
            source = self._copies[source - self._width] if source is not None and source >= self._width else source
            self._copies.append(source)
            self.steps.append(lambda rows: [row + (None if source is None else row[source],) for row in rows])
        else:
            compute = filters.compile_term(expr, self.slots)
            self.steps.append(lambda rows: [row + (compute(row),) for row in rows])
            self._copies, self._width = [], len(self.variables) + 1
        self.variables += (variable,)
        self.described.append(f"extend ?{variable}")

    def _after_copies(self) -> None:
        """A step other than an extend of a plain variable follows."""
        self._copies, self._width = [], len(self.variables)

    def filter(self, expr: Expr, text: str) -> None:
        self._after_copies()
        test = filters.compile_filter(expr, text).bind(self.slots)
        self.described.append(f"HAVING {text}")
        self.steps.append(lambda rows: [row for row in rows if test(row)])

    def project(self, variables: list[str]) -> None:
        slots = self.slots
        positions = [slots.get(v) for v in variables]
        copies, width = self._copies, self._width
        if copies:  # read the copied variables where they come from, the copies left out
            positions = [copies[i - width] if i is not None and i >= width else i for i in positions]
            del self.steps[len(self.steps) - len(copies):]
        self.variables = tuple(variables)
        self._after_copies()
        self.described.append("project " + " ".join("?" + v for v in variables))
        if None in positions or len(positions) < 2:
            self.steps.append(lambda rows: [tuple(None if i is None else row[i] for i in positions) for row in rows])
        else:
            take = itemgetter(*positions)
            self.steps.append(lambda rows: [take(row) for row in rows])

    def distinct(self) -> None:
        self._after_copies()
        self.described.append("DISTINCT")
        self.steps.append(lambda rows: list(dict.fromkeys(rows)))

    def order_by(self, conditions: list[tuple[Expr, bool]]) -> None:
        self._after_copies()
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
        self._after_copies()
        end = None if length is None else start + length
        self.described.append(f"OFFSET {start} LIMIT {length}")
        self.steps.append(lambda rows: rows[start:end])

    def __call__(self, rows: list[Row]) -> list[Row]:
        for step in self.steps:
            rows = step(rows)
        return rows
