"""Aggregate states that follow a group's solutions in both directions (SPARQL 18.5.1).

Every state takes ``add(value, weight)``: a solution's argument value (a canonical term,
or None for an unbound variable or an evaluation error) entering (+) or leaving (-) the
group. None of them rescans the group on a removal: COUNT, SUM and AVG keep exact sums
(integers, decimals, and binary floats as fractions, so a value leaving subtracts exactly
what it added); MIN and MAX keep a heap with lazy deletion; DISTINCT keeps a multiset of
values and applies a value once, when its count leaves or returns to zero.

Errors, as the W3C tests have them: COUNT counts bound, non-error values; SUM and AVG are
an error (the variable stays unbound) while the group holds an unbound or non-numeric
value; MIN, MAX and SAMPLE skip unbound values and order the others as ORDER BY does;
GROUP_CONCAT skips unbound values and is an error while the group holds a non-string.
AVG of an empty group is 0; SUM of integers is an integer, AVG of integers a decimal.
"""
from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from decimal import Decimal
from typing import Optional

from ..filters import EVAL_FAILURES, LangString, Single, _arith, term_value, value_term
from .term_order import Descending, order_key

_XSD_DECIMAL = "http://www.w3.org/2001/XMLSchema#decimal"

_RANKS = {int: 0, Decimal: 1, Single: 2, float: 3}


class Aggregate(ABC):
    """The common part: DISTINCT's multiset of values, and whether values are kept at all.
    Each aggregate function is a subclass (``make_aggregate``) giving its ``result``."""
    keeps_values = False

    def __init__(self, distinct: bool):
        self.distinct = distinct
        self.values: dict = {}
        if not (distinct or self.keeps_values):
            self.add = self.include  # nothing to keep per value: straight to the function's state

    def add(self, value: Optional[str], weight: int) -> None:
        if not (self.distinct or self.keeps_values):
            self.include(value, weight)
            return
        before = self.values.get(value, 0)
        after = before + weight
        if after:
            self.values[value] = after
        else:
            del self.values[value]
        if not self.distinct:
            self.include(value, weight)
        elif before == 0 and after != 0:
            self.include(value, 1)
        elif before != 0 and after == 0:
            self.include(value, -1)

    def include(self, value: Optional[str], weight: int) -> None:
        """The value counted ``weight`` more times (once per distinct value under DISTINCT)."""

    @abstractmethod
    def result(self) -> Optional[str]:
        """The aggregate's value over the group as it stands: a term, or None for an error."""


class Count(Aggregate):
    def __init__(self, distinct: bool):
        super().__init__(distinct)
        self.n = 0

    def include(self, value, weight):
        if value is not None:
            self.n += weight

    def result(self):
        return f'"{self.n}"^^<http://www.w3.org/2001/XMLSchema#integer>'


class Sum(Aggregate):
    """SUM (and AVG): given Python values (``by_value``, when not DISTINCT: the argument is
    computed straight to a number, no term in between) or terms."""

    def __init__(self, distinct: bool, by_value: bool = False):
        super().__init__(distinct)
        self.by_value = by_value and not distinct
        self.errors = 0
        self.n = 0
        self.by_rank = [0, 0, 0, 0]  # how many ints, decimals, floats, doubles
        self.exact = 0  # ints
        self.decimal = Decimal(0)
        self.binary = 0  # floats and doubles, exactly (a Fraction once one comes: fractions imported then)
        if self.by_value:
            self.add = self._add_number

    def _add_number(self, number, weight):
        """``include`` of a value given as a number (``by_value``), a decimal taken first:
        prices, amounts and measurements mostly are. The decimal branch is written out in
        ``JoinAggregateNode.a_activation``: a change to it goes there too."""
        if type(number) is Decimal:
            self.n += weight
            self.by_rank[1] += weight
            self.decimal += number * weight
        else:
            self.include(number, weight)

    def include(self, value, weight):
        number = value if self.by_value else None
        if value is not None and not self.by_value:
            try:
                number = term_value(value)
            except EVAL_FAILURES:
                number = None
        rank = _RANKS.get(type(number))
        if rank is None:
            self.errors += weight
            return
        self.n += weight
        self.by_rank[rank] += weight
        if rank == 0:
            self.exact += number * weight
        elif rank == 1:
            self.decimal += number * weight
        else:
            from fractions import Fraction

            self.binary += Fraction(float(number)) * weight

    def total(self):
        rank = max((r for r, n in enumerate(self.by_rank) if n), default=0)
        if rank == 0:
            return self.exact
        if rank == 1:
            return self.decimal + self.exact
        from fractions import Fraction

        value = float(self.binary + Fraction(self.decimal) + self.exact)
        return Single(value) if rank == 2 else value

    def result(self):
        if self.errors:
            return None
        return value_term(self.total())


class Avg(Sum):
    def result(self):
        if self.errors:
            return None
        if self.n == 0:
            return '"0"^^<http://www.w3.org/2001/XMLSchema#integer>'
        by_rank = self.by_rank
        if not (by_rank[2] or by_rank[3]):  # no float or double: the decimal quotient _arith gives
            try:
                quotient = (self.decimal + self.exact if by_rank[1] else Decimal(self.exact)) / self.n
            except EVAL_FAILURES:
                return None
            # value_term's decimal lexical form: str() gives format(quotient, "f") wherever it
            # writes no exponent (an exponent of at most 0, an adjusted exponent of at least -6)
            text = str(quotient)
            if "E" in text:
                return value_term(quotient)
            return f'"{text}"^^<{_XSD_DECIMAL}>' if "." in text else f'"{text}.0"^^<{_XSD_DECIMAL}>'
        try:
            return value_term(_arith("/", self.total(), self.n))
        except EVAL_FAILURES:
            return None


class Extreme(Aggregate):
    """MIN or MAX: a heap of the values present, stale entries dropped when they surface."""
    keeps_values = True

    def __init__(self, distinct: bool, largest: bool):
        super().__init__(distinct)
        self.largest = largest
        self.heap: list = []

    def include(self, value, weight):
        if value is not None and weight > 0:
            key = order_key(value)
            heapq.heappush(self.heap, (Descending(key) if self.largest else key, value))
            if len(self.heap) > 2 * len(self.values) + 16:  # too many stale entries: rebuild
                self.heap = [(Descending(order_key(v)) if self.largest else order_key(v), v)
                             for v in self.values if v is not None]
                heapq.heapify(self.heap)

    def result(self):
        heap, values = self.heap, self.values
        while heap and heap[0][1] not in values:
            heapq.heappop(heap)
        return heap[0][1] if heap else None


class Sample(Aggregate):
    keeps_values = True

    def result(self):
        for value in self.values:
            if value is not None:
                return value
        return None


class GroupConcat(Aggregate):
    keeps_values = True

    def __init__(self, distinct: bool, separator: str):
        super().__init__(distinct)
        self.separator = separator

    def result(self):
        parts = []
        for value, count in self.values.items():
            if value is None:
                continue
            try:
                text = term_value(value)
            except EVAL_FAILURES:
                return None
            if type(text) is LangString:
                text = text.lexical
            elif type(text) is not str:
                return None
            parts.extend([text] * (1 if self.distinct else count))
        return value_term(self.separator.join(parts))


def make_aggregate(function: str, distinct: bool, separator: str = " ", by_value: bool = False) -> Aggregate:
    """A fresh state for one group; ``function`` as rdflib names it (Count, Sum, ...)."""
    if function == "Count":
        return Count(distinct)
    if function == "Sum":
        return Sum(distinct, by_value)
    if function == "Avg":
        return Avg(distinct, by_value)
    if function in ("Min", "Max"):
        return Extreme(distinct, function == "Max")
    if function == "Sample":
        return Sample(distinct)
    if function == "GroupConcat":
        return GroupConcat(distinct, separator)
    raise ValueError(f"unknown aggregate {function}")


AGGREGATES = ("Count", "Sum", "Avg", "Min", "Max", "Sample", "GroupConcat")
BY_VALUE = ("Sum", "Avg")  # given numbers, not terms, when not DISTINCT
